import { fileURLToPath } from 'node:url';
import {
  type AppProcess,
  type RedisServerHandle,
  scrapeMetrics,
  startApp,
  startRedisServer,
  waitFor,
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
    expect((await fetch(`${gateway.url}/readyz`)).status).toBe(200);
    const families = await scrapeMetrics(`${gateway.url}/metrics`);
    expect(families.get('herald_http_requests_total')?.type).toBe('COUNTER');
    expect(families.has('herald_queue_jobs')).toBe(true);

    await redis.stop();
    const health = await fetch(`${gateway.url}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: 'ok' });
    const ready = await fetch(`${gateway.url}/readyz`);
    expect(ready.status).toBe(503);
    expect(await ready.json()).toMatchObject({ code: 'HERALD_ERR_UNAVAILABLE' });
    // A scrape still answers while Redis is down.
    expect((await scrapeMetrics(`${gateway.url}/metrics`)).has('herald_http_requests_total')).toBe(true);

    await redis.restart();
    await waitFor(async () => (await fetch(`${gateway.url}/readyz`)).status === 200, {
      timeoutMs: 20_000,
      what: '/readyz 200 after Redis came back',
    });
  });
});
