import { createRedis, DeploymentFingerprint, loggerOptions } from '@herald/config';
import closeWithGrace from 'close-with-grace';
import { pino } from 'pino';
import { loadConfig, type WorkerConfig } from './config.js';
import { startHttp } from './http.js';
import { type NotificationWorker, startWorker } from './worker.js';

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
// The operations server first: while the worker waits for Redis (at start), /healthz answers 200, so
// that an orchestrator does not restart workers because Redis is away, and /readyz says 503.
let running: NotificationWorker | undefined;
// The settings that must agree with the gateway's and the realtime servers': /readyz names a mismatch.
const fingerprintRedis = createRedis(
  { url: config.redisUrl, clusterNodes: config.redisClusterNodes },
  'worker',
);
fingerprintRedis.on('error', () => {});
const fingerprint = new DeploymentFingerprint(fingerprintRedis, {
  deployment: config.deployment.name,
  app: 'worker',
  instanceId: config.instanceId,
  settings: config.deployment.settings,
});
fingerprint.start();
const http = await startHttp({
  port: config.port,
  host: config.host,
  instanceId: config.instanceId,
  ready: () => running?.ready() ?? Promise.reject(new Error('still connecting to Redis')),
  metrics: () => running?.metrics,
  mismatches: () => fingerprint.mismatches(),
});
running = await startWorker(config, log);

// SIGTERM/SIGINT: let in-flight jobs finish (BullMQ's close waits for them), then disconnect.
closeWithGrace({ delay: SHUTDOWN_GRACE_MS }, async ({ signal, err }) => {
  if (err) log.error({ err }, 'fatal error; shutting down');
  else log.info({ signal }, 'shutting down');
  await http.close();
  await running?.close();
  await fingerprint.stop();
  fingerprintRedis.disconnect();
});

log.info({ port: http.port, queue: config.queue.name, concurrency: config.concurrency }, 'listening');
