import { configOrExit, serveHttp } from '@herald/config/serve';
import { buildWebServer } from './app.js';
import { loadConfig } from './config.js';

const config = configOrExit(() => loadConfig());
// SIGTERM/SIGINT: stop accepting, finish in-flight requests (proxied WebSockets are closed, and the
// browsers resume elsewhere from their offset); exit within the grace.
await serveHttp(await buildWebServer(config), { ...config, service: 'web' });
