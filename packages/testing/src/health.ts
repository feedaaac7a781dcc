import { expect } from 'vitest';
import { scrapeMetrics } from './metrics.js';
import type { RedisServerHandle } from './redis-server.js';
import { waitFor } from './wait.js';

/**
 * The operations contract every Herald app keeps through a Redis outage, checked against a real process
 * on a Redis of its own: `/readyz` 200, then with Redis stopped `/healthz` still 200 (`health` is what
 * its body must contain), `/readyz` 503 `HERALD_ERR_UNAVAILABLE`, `/metrics` still scraped (with
 * `metric` in it), and `/readyz` 200 again once Redis is back.
 *
 * @example
 * ```ts
 * await expectHealthThroughOutage(worker.url, redis, { metric: 'herald_worker_jobs_total' });
 * ```
 */
export async function expectHealthThroughOutage(
  url: string,
  redis: RedisServerHandle,
  options: { metric: string; health?: Record<string, unknown>; whileDown?: () => Promise<void> },
): Promise<void> {
  expect((await fetch(`${url}/readyz`)).status).toBe(200);
  await redis.stop();
  const health = await fetch(`${url}/healthz`);
  expect(health.status).toBe(200);
  expect(await health.json()).toMatchObject({ status: 'ok', ...options.health });
  const ready = await fetch(`${url}/readyz`);
  expect(ready.status).toBe(503);
  const answer = (await ready.json()) as { code?: string; error?: string };
  expect(answer).toMatchObject({ code: 'HERALD_ERR_UNAVAILABLE' });
  // A probe: not ready, because of Redis; not a request that "accepted nothing" (every app alike).
  expect(answer.error).toMatch(/^Not ready: Redis or the queue does not answer/);
  expect((await scrapeMetrics(`${url}/metrics`)).has(options.metric)).toBe(true);
  await options.whileDown?.();
  await redis.restart();
  await waitFor(async () => (await fetch(`${url}/readyz`)).status === 200, {
    timeoutMs: 30_000,
    what: '/readyz 200 after Redis came back',
  });
}
