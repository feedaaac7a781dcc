import { ConfigError } from '@herald/config';
import { configOrExit, serveHttp } from '@herald/config/serve';
import { buildApp } from './app.js';
import { loadConfig } from './config.js';

const config = configOrExit(() => loadConfig());
// SIGTERM/SIGINT: stop accepting, finish in-flight requests, close the queue and Redis; exit within the grace.
// A setting Redis turns out not to support (HERALD_DURABILITY=aof on a Redis without WAITAOF) is said as
// a setting refused by its schema is: one message, exit 1.
const app = await buildApp(config).catch((error: unknown) => {
  if (!(error instanceof ConfigError)) throw error;
  process.stderr.write(`${error.message}\n`);
  process.exit(1);
});
await serveHttp(app, {
  ...config,
  service: 'gateway',
  warnings: [...config.warnings, ...config.pushWarnings],
});
