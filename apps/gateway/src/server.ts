import { configOrExit, serveHttp } from '@herald/config/serve';
import { buildApp } from './app.js';
import { loadConfig } from './config.js';

const config = configOrExit(() => loadConfig());
// SIGTERM/SIGINT: stop accepting, finish in-flight requests, close the queue and Redis; exit within the grace.
await serveHttp(await buildApp(config), {
  ...config,
  service: 'gateway',
  warnings: [...config.warnings, ...config.pushWarnings],
});
