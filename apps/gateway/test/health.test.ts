import { fileURLToPath } from 'node:url';
import { appOnOwnRedis, expectHealthThroughOutage, scrapeMetrics } from '@herald/testing';
import { describe, expect, it } from 'vitest';
import { testEnv } from './helpers.js';

const entry = fileURLToPath(new URL('../dist/server.js', import.meta.url));

describe('gateway liveness, readiness and metrics (a real process on a Redis of its own)', () => {
  const own = appOnOwnRedis('gateway', entry, (url) => testEnv({ REDIS_URL: url }));

  it('/healthz stays 200 while Redis is down; /readyz answers 503 JSON then, 200 once Redis is back', async () => {
    const families = await scrapeMetrics(`${own.app.url}/metrics`);
    expect(families.get('herald_http_requests_total')?.type).toBe('COUNTER');
    expect(families.has('herald_queue_jobs')).toBe(true);
    // Its one partition, read on the scrape: nothing waits.
    expect(families.get('herald_queue_stalled_seconds')?.metrics).toEqual([
      expect.objectContaining({ labels: { queue: expect.stringMatching(/^\{herald\}:/) }, value: '0' }),
    ]);
    await expectHealthThroughOutage(own.app.url, own.redis, { metric: 'herald_http_requests_total' });
  });
});
