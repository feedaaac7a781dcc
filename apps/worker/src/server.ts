import { createLogger, createRedis, credentialsRefused, DeploymentFingerprint } from '@herald/config';
import { configOrExit, onShutdown } from '@herald/config/serve';
import { loadConfig } from './config.js';
import { startHttp } from './http.js';
import { type NotificationWorker, startWorker } from './worker.js';

const config = configOrExit(() => loadConfig());

const log = createLogger(config.log, 'worker');
for (const warning of config.warnings) log.warn(warning);
for (const warning of config.push.warnings) log.warn(warning);
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
// The operations server first: while the worker waits for Redis (at start), /healthz answers 200, so
// that an orchestrator does not restart workers because Redis is away, and /readyz says 503.
let running: NotificationWorker | undefined;
let http: Awaited<ReturnType<typeof startHttp>> | undefined;
// SIGTERM/SIGINT: let in-flight jobs finish (BullMQ's close waits for them), then disconnect. Registered
// before anything starts: a worker stopped while it waits for Redis (no job taken yet) exits 0, and one
// that cannot start (its port taken) logs why as JSON and exits 1, like the gateway and realtime.
onShutdown(log, async () => {
  await http?.close();
  await running?.close();
  await fingerprint.stop();
  fingerprintRedis.disconnect();
});
http = await startHttp({
  port: config.port,
  host: config.host,
  instanceId: config.instanceId,
  // Redis refusing REDIS_URL's password (every connection has the same): said as such.
  ready: () => {
    const refused = credentialsRefused(fingerprintRedis);
    if (refused) return Promise.reject(refused);
    return running?.ready() ?? Promise.reject(new Error('still connecting to Redis'));
  },
  metrics: () => running?.metrics,
  mismatches: () => fingerprint.mismatches(),
});
running = await startWorker(config, log);

log.info({ port: http.port, queue: config.queue.name, concurrency: config.concurrency }, 'listening');
