import closeWithGrace from 'close-with-grace';
import { buildWebServer } from './app.js';
import { ConfigError, loadConfig, type WebConfig } from './config.js';

/** Most time a graceful shutdown may take before the process exits anyway. */
const SHUTDOWN_GRACE_MS = 10_000;

let config: WebConfig;
try {
  config = loadConfig();
} catch (error) {
  process.stderr.write(`${error instanceof ConfigError ? error.message : String(error)}\n`);
  process.exit(1);
}

const app = await buildWebServer(config);
for (const warning of config.warnings) app.log.warn(warning);

// SIGTERM/SIGINT: stop accepting, finish in-flight requests (proxied WebSockets are closed, and the
// browsers resume elsewhere from their offset); exit within the grace.
closeWithGrace({ delay: SHUTDOWN_GRACE_MS }, async ({ signal, err }) => {
  if (err) app.log.error({ err }, 'fatal error; shutting down');
  else app.log.info({ signal }, 'shutting down');
  const closeIdle = setInterval(() => app.server.closeIdleConnections(), 50);
  try {
    await app.close();
  } finally {
    clearInterval(closeIdle);
  }
});

await app.listen({ port: config.port, host: config.host });
const address = app.server.address();
const port = typeof address === 'object' && address ? address.port : config.port;
app.log.info({ port, service: 'web' }, 'listening');
