import { loggerOptions } from '@herald/config';
import closeWithGrace from 'close-with-grace';
import { pino } from 'pino';
import { loadConfig, type RealtimeConfig } from './config.js';
import { buildRealtime } from './realtime.js';

const SHUTDOWN_GRACE_MS = 10_000;

let config: RealtimeConfig;
try {
  config = loadConfig();
} catch (error) {
  process.stderr.write(`${(error as Error).message}\n`);
  process.exit(1);
}

const log = pino(loggerOptions(config.log, 'realtime'));
for (const warning of config.warnings) log.warn(warning);
const server = buildRealtime(config, log);

closeWithGrace({ delay: SHUTDOWN_GRACE_MS }, async ({ signal, err }) => {
  if (err) log.error({ err }, 'fatal error; shutting down');
  else log.info({ signal }, 'shutting down');
  await server.close();
});

const port = await server.listen();
log.info({ port }, 'listening');
