import { loggerOptions } from '@herald/protocol';
import closeWithGrace from 'close-with-grace';
import { pino } from 'pino';
import { loadConfig, type WorkerConfig } from './config.js';
import { startHttp } from './http.js';
import { startWorker } from './worker.js';

const SHUTDOWN_GRACE_MS = 10_000;

let config: WorkerConfig;
try {
  config = loadConfig();
} catch (error) {
  process.stderr.write(`${(error as Error).message}\n`);
  process.exit(1);
}

const log = pino(loggerOptions(config.log, 'worker'));
for (const warning of config.warnings) log.warn(warning);
const running = await startWorker(config, log);
const http = await startHttp({
  port: config.port,
  host: config.host,
  instanceId: config.instanceId,
  ready: running.ready,
  metrics: running.metrics,
});

// SIGTERM/SIGINT: let in-flight jobs finish (BullMQ's close waits for them), then disconnect.
closeWithGrace({ delay: SHUTDOWN_GRACE_MS }, async ({ signal, err }) => {
  if (err) log.error({ err }, 'fatal error; shutting down');
  else log.info({ signal }, 'shutting down');
  await http.close();
  await running.close();
});

log.info({ port: http.port, queue: config.queue.name, concurrency: config.concurrency }, 'listening');
