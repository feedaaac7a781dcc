import { inject } from 'vitest';

export { CHROMIUM_ARGS, CHROMIUM_PATH, launchChromium } from './browser.js';
export { loopbackCertificate } from './certificate.js';
export { isolatedEnv } from './env.js';
export { expectHealthThroughOutage } from './health.js';
export { appOnOwnRedis } from './own-redis.js';
export { freeLowPort, freePort, isPortFree } from './ports.js';
export { type AppProcess, startApp } from './processes.js';
export { parseClusterNodes, type RedisClusterHandle, startRedisCluster } from './redis-cluster.js';
export { hasRedisServerBinary, ping, type RedisServerHandle, startRedisServer } from './redis-server.js';
export { expectEach, refusal } from './refusal.js';
export { randomId, waitFor } from './wait.js';

/** URL of the Redis this test run uses (see `global-setup`). */
export function redisUrl(): string {
  return inject('redisUrl');
}
export { type MetricFamily, scrapeMetrics } from './metrics.js';
