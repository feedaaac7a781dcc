import { fileURLToPath } from 'node:url';
import {
  type AppProcess,
  expectHealthThroughOutage,
  type RedisServerHandle,
  scrapeMetrics,
  startApp,
  startRedisServer,
} from '@herald/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testEnv } from './helpers.js';

const entry = fileURLToPath(new URL('../dist/server.js', import.meta.url));

describe('gateway liveness, readiness and metrics (a real process on a Redis of its own)', () => {
  let redis: RedisServerHandle;
  let gateway: AppProcess;

  beforeAll(async () => {
    redis = await startRedisServer();
    gateway = await startApp({ name: 'gateway', entry, env: testEnv({ REDIS_URL: redis.url }) });
  });
  afterAll(async () => {
    await gateway?.stop();
    await redis?.dispose();
  });

  it('/healthz stays 200 while Redis is down; /readyz answers 503 JSON then, 200 once Redis is back', async () => {
    const families = await scrapeMetrics(`${gateway.url}/metrics`);
    expect(families.get('herald_http_requests_total')?.type).toBe('COUNTER');
    expect(families.has('herald_queue_jobs')).toBe(true);
    await expectHealthThroughOutage(gateway.url, redis, { metric: 'herald_http_requests_total' });
  });
});
