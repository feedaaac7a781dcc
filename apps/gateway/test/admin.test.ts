import type { AddressInfo } from 'node:net';
import { latencyBucket, statsKeys } from '@herald/config';
import type { AdminSnapshot, FailedJobs } from '@herald/protocol';
import { randomId, waitFor } from '@herald/testing';
import { EventSourceParserStream } from 'eventsource-parser/stream';
import { describe, expect, it } from 'vitest';
import {
  API_KEY,
  auth,
  buildTestApp,
  disposeTestApp,
  everyPartition,
  testAppForFile,
  workerOnEveryPartition,
} from './helpers.js';

// 32+ bytes, and none of the API keys.
const ADMIN_KEY = 'admin-key-0123456789abcdef0123456789abcdef';
const admin = { authorization: `Bearer ${ADMIN_KEY}` };

const app = await testAppForFile({
  HERALD_ADMIN_KEY: ADMIN_KEY,
  // Slow refill: the bucket a test drains stays visibly drained while the snapshot is read.
  HERALD_RATE_LIMIT_BURST: '10',
  HERALD_RATE_LIMIT_PER_SECOND: '0.5',
  HERALD_JOB_ATTEMPTS: '1',
});

async function notify(userId: string, headers: Record<string, string> = auth): Promise<number> {
  const response = await app.inject({
    method: 'POST',
    url: '/notify',
    headers,
    payload: { userId, payload: {} },
  });
  return response.statusCode;
}

async function snapshot(): Promise<AdminSnapshot> {
  const response = await app.inject({ method: 'GET', url: '/admin/snapshot', headers: admin });
  expect(response.statusCode).toBe(200);
  return response.json<AdminSnapshot>();
}

const sum = (values: readonly number[]) => values.reduce((a, b) => a + b, 0);

describe('the admin API: who may use it', () => {
  it('refuses no key, a wrong key and tenant API keys (of any tenant) with 401; takes the admin key', async () => {
    const other = await app.apiKeys.create({ name: 'intruder', tenantId: randomId('tenant') });
    for (const url of ['/admin/snapshot', '/admin/failed', '/admin/stream']) {
      const refusals = await Promise.all(
        [
          {},
          { authorization: `Bearer ${API_KEY}` },
          { authorization: `Bearer ${other.key}` },
          { authorization: `Bearer ${ADMIN_KEY}x` },
          { authorization: `Basic ${Buffer.from(`admin:${ADMIN_KEY}`).toString('base64')}` },
        ].map((headers) => app.inject({ method: 'GET', url, headers })),
      );
      for (const response of refusals) {
        expect(response.statusCode).toBe(401);
        expect(response.json()).toMatchObject({ code: 'HERALD_ERR_UNAUTHORIZED' });
        expect(response.headers['www-authenticate']).toBe('Bearer realm="herald-admin"');
      }
    }
    // A key pasted with a space or a newline inside: told as a malformed header, not a missing key.
    const spaced = await app.inject({
      method: 'GET',
      url: '/admin/snapshot',
      headers: { authorization: `Bearer ${ADMIN_KEY} x` },
    });
    expect(spaced.json().error).toBe(
      'The Authorization header is not "Bearer <HERALD_ADMIN_KEY>" (one key, no space inside it): send "Authorization: Bearer <HERALD_ADMIN_KEY>".',
    );
    const retry = await app.inject({ method: 'POST', url: '/admin/failed/x/retry', headers: auth });
    expect(retry.statusCode).toBe(401);
    expect((await app.inject({ method: 'GET', url: '/admin/failed', headers: admin })).statusCode).toBe(200);
  });

  it('is off without HERALD_ADMIN_KEY, and says so (404 HERALD_ERR_ADMIN_DISABLED)', async () => {
    const off = await buildTestApp();
    try {
      const response = await off.inject({ method: 'GET', url: '/admin/snapshot', headers: admin });
      expect(response.statusCode).toBe(404);
      expect(response.json()).toMatchObject({
        code: 'HERALD_ERR_ADMIN_DISABLED',
        error: expect.stringContaining('set HERALD_ADMIN_KEY'),
      });
    } finally {
      await disposeTestApp(off);
    }
  });

  it('documents its routes in /openapi.json behind the admin key', async () => {
    const document = (await app.inject({ method: 'GET', url: '/openapi.json' })).json<{
      paths: Record<string, Record<string, { security?: unknown; responses: Record<string, unknown> }>>;
    }>();
    for (const [path, method] of [
      ['/admin/snapshot', 'get'],
      ['/admin/stream', 'get'],
      ['/admin/failed', 'get'],
      ['/admin/failed/{id}/retry', 'post'],
    ] as const) {
      const operation = document.paths[path]?.[method];
      expect(operation?.security).toEqual([{ adminKey: [] }]);
      expect(Object.keys(operation?.responses ?? {})).toEqual(
        expect.arrayContaining(['200', '401', '404', '503']),
      );
    }
  });
});

describe('GET /admin/snapshot', () => {
  it('counts allowed and denied decisions per second, and shows the flooded user with its drained bucket', async () => {
    const flooded = randomId('flooded');
    const statuses = [];
    for (let i = 0; i < 15; i++) statuses.push(await notify(flooded));
    expect(statuses.filter((status) => status === 202)).toHaveLength(10);

    const seen = await waitFor(
      async () => {
        const current = await snapshot();
        return sum(current.traffic.denied) >= 5 ? current : undefined;
      },
      { timeoutMs: 5000, what: 'the flushed second in the snapshot' },
    );
    expect(sum(seen.traffic.allowed)).toBeGreaterThanOrEqual(10);
    expect(seen.traffic.deniedByPolicy.recipient).toBeGreaterThanOrEqual(5);
    expect(seen.traffic.seconds).toHaveLength(seen.windowSeconds);
    expect(seen.traffic.seconds.at(-1)).toBeLessThan(Date.now() / 1000);
    const hot = seen.hotUsers.find((user) => user.userId === flooded);
    expect(hot).toMatchObject({ tenantId: 'default', decisions: 15, denied: 5 });
    // Peeked now, without taking a token: drained (it refills at 0.5/s).
    expect(hot?.tokens).toMatchObject({ limit: 10 });
    expect(hot?.tokens?.remaining).toBeLessThanOrEqual(2);
    expect(seen.hotUsers[0]?.denied).toBeGreaterThanOrEqual(5);
    // No worker: the accepted notifications wait in the queue.
    expect(seen.queue.waiting).toBeGreaterThanOrEqual(10);

    // Peeking took nothing: the bucket is where it was (or refilled a little), never lower.
    const again = (await snapshot()).hotUsers.find((user) => user.userId === flooded);
    expect(again?.tokens?.remaining).toBeGreaterThanOrEqual(hot?.tokens?.remaining ?? 0);
  });

  it('sums what realtime instances report: live heartbeats only, resume outcomes and latency percentiles', async () => {
    const keys = statsKeys(app.config.keyPrefix, app.config.deployment.name);
    const now = Date.now();
    const second = Math.floor(now / 1000) - 2;
    await app.redis
      .multi()
      .set(keys.instance('rt-a'), JSON.stringify({ connections: 3, at: now }), 'PX', 3000)
      .zadd(keys.instances, now, 'rt-a')
      .set(keys.instance('rt-b'), JSON.stringify({ connections: 5, at: now }), 'PX', 3000)
      .zadd(keys.instances, now, 'rt-b')
      // Heard from 10 s ago: gone.
      .zadd(keys.instances, now - 10_000, 'rt-dead')
      .hset(keys.delivery(second), {
        fresh: 2,
        recovered: 3,
        resync: 1,
        replayed: 40,
        [`lat:${latencyBucket(10)}`]: 90,
        [`lat:${latencyBucket(300)}`]: 10,
      })
      .hset(keys.delivery(second - 1), { recovered: 1, [`lat:${latencyBucket(10)}`]: 100 })
      .exec();
    const current = await snapshot();
    expect(current.realtime.map(({ instanceId, connections }) => ({ instanceId, connections }))).toEqual([
      { instanceId: 'rt-a', connections: 3 },
      { instanceId: 'rt-b', connections: 5 },
    ]);
    expect(current.resume).toEqual({ fresh: 2, recovered: 4, resync: 1, replayed: 40 });
    expect(current.latency.count).toBe(200);
    // 190 of 200 at 10 ms: p50 and p90 in its bucket (≤ 19 % above); p99 and max in the 300 ms one.
    expect(current.latency.p50).toBeGreaterThanOrEqual(10);
    expect(current.latency.p50).toBeLessThanOrEqual(11.9);
    expect(current.latency.p90).toBe(current.latency.p50);
    expect(current.latency.p99).toBeGreaterThanOrEqual(300);
    expect(current.latency.p99).toBeLessThanOrEqual(357);
  });
});

describe('GET /admin/stream', () => {
  it('pushes a snapshot at once and then one per second, as Server-Sent Events', async () => {
    const address = await app.listen({ port: 0, host: '127.0.0.1' });
    const controller = new AbortController();
    const response = await fetch(`${address}/admin/stream`, { headers: admin, signal: controller.signal });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/event-stream');
    const events = (response.body as ReadableStream<Uint8Array>)
      .pipeThrough(new TextDecoderStream())
      .pipeThrough(new EventSourceParserStream())
      .getReader();
    const received: AdminSnapshot[] = [];
    try {
      while (received.length < 3) {
        const { value, done } = await events.read();
        if (done) break;
        expect(value.event).toBe('snapshot');
        received.push(JSON.parse(value.data) as AdminSnapshot);
      }
    } finally {
      controller.abort();
    }
    expect(received).toHaveLength(3);
    const lastSeconds = received.map((snapshot) => snapshot.traffic.seconds.at(-1) ?? 0);
    // Each push is a newer second (the first one is read on connect, the others every second).
    expect(lastSeconds[2]).toBeGreaterThan(lastSeconds[0] ?? 0);
    await waitFor(() => app.adminStream.size === 0, { what: 'the closed stream to unsubscribe' });
  });

  it("HEAD answers the stream's headers at once and ends, holding no subscription", async () => {
    // Node sends a HEAD answer's headers only at its end, which a stream never reaches: it hung.
    const address = app.server.listening
      ? `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
      : await app.listen({ port: 0, host: '127.0.0.1' });
    const response = await fetch(`${address}/admin/stream`, {
      method: 'HEAD',
      headers: admin,
      signal: AbortSignal.timeout(5000),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/event-stream');
    await waitFor(() => app.adminStream.size === 0, { what: 'no stream left subscribed' });
  });
});

describe('failed notifications', () => {
  it('lists them newest first and retries one; a retried or unknown one is refused', async () => {
    const userId = randomId('doomed');
    const sent = await app.inject({
      method: 'POST',
      url: '/notify',
      headers: auth,
      payload: { userId, payload: {} },
    });
    const { id } = sent.json<{ id: string }>();
    const worker = workerOnEveryPartition(app, async (job) => {
      if (job.data.userId === userId) throw new Error('push refused');
    });
    try {
      const listed = await waitFor(
        async () => {
          const response = await app.inject({ method: 'GET', url: '/admin/failed?limit=5', headers: admin });
          const body = response.json<FailedJobs>();
          return body.jobs.some((job) => job.id === id) ? body : undefined;
        },
        { timeoutMs: 20_000, what: 'the notification to fail' },
      );
      expect(listed.count).toBeGreaterThanOrEqual(1);
      expect(listed.jobs.find((job) => job.id === id)).toMatchObject({
        tenantId: 'default',
        userId,
        attempts: 1,
        reason: 'push refused',
      });
      // Stopped, so that the retried one stays waiting.
      await worker.close();

      const retried = await app.inject({ method: 'POST', url: `/admin/failed/${id}/retry`, headers: admin });
      expect(retried.statusCode).toBe(200);
      expect(retried.json()).toEqual({ id, status: 'retried' });
      expect(await everyPartition(app).getJobState(id)).toBe('prioritized');
      const again = await app.inject({ method: 'POST', url: `/admin/failed/${id}/retry`, headers: admin });
      expect(again.statusCode).toBe(409);
      expect(again.json()).toMatchObject({ code: 'HERALD_ERR_NOT_FAILED', state: 'waiting' });
      const unknown = await app.inject({ method: 'POST', url: '/admin/failed/nope/retry', headers: admin });
      expect(unknown.statusCode).toBe(404);
      expect(unknown.json()).toMatchObject({ code: 'HERALD_ERR_NOT_FOUND' });
      expect((await snapshot()).failed.jobs.some((job) => job.id === id)).toBe(false);
    } finally {
      await worker.close();
    }
  });

  it('validates the limit (400 naming it)', async () => {
    const response = await app.inject({ method: 'GET', url: '/admin/failed?limit=0', headers: admin });
    expect(response.statusCode).toBe(400);
    expect(response.json()).toMatchObject({
      code: 'HERALD_ERR_VALIDATION',
      details: [{ field: 'querystring.limit' }],
    });
  });
});
