import {
  type AppProcess,
  expectHealthThroughOutage,
  freePort,
  type RedisServerHandle,
  scrapeMetrics,
  startRedisServer,
  waitFor,
} from '@herald/testing';
import { Redis } from 'ioredis';
import { io } from 'socket.io-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_KEY, appended, gatewayCall, Stack } from './support/stack.js';

describe('realtime liveness, readiness and metrics (a real process on a Redis of its own)', () => {
  let redis: RedisServerHandle;
  let stack: Stack;
  let realtime: AppProcess;

  beforeAll(async () => {
    redis = await startRedisServer();
    stack = new Stack(redis.url);
    realtime = await stack.start('realtime', 'rt-health');
  });
  afterAll(async () => {
    await stack?.dispose();
    await redis?.dispose();
  });

  const counter = (families: Awaited<ReturnType<typeof scrapeMetrics>>, name: string, code?: string) =>
    families.get(name)?.metrics.find((m) => code === undefined || m.labels?.code === code)?.value;

  it('counts connected sockets, refused handshakes by code and delivered notifications', async () => {
    const refused = io(realtime.url, {
      auth: { token: 'forged' },
      transports: ['websocket'],
      reconnection: false,
    });
    await new Promise<void>((resolve) => refused.once('connect_error', () => resolve()));
    refused.disconnect();

    await stack.inbox.append({
      id: 'n-1',
      userId: 'alice',
      payload: {},
      createdAt: new Date().toISOString(),
    });
    const alice = stack.client('alice');
    await alice.connect(realtime.url, '0-0');
    expect(alice.received.map((n) => n.id)).toEqual(['n-1']);

    const families = await scrapeMetrics(`${realtime.url}/metrics`);
    expect(counter(families, 'herald_realtime_sockets')).toBe('1');
    expect(counter(families, 'herald_realtime_handshakes_refused_total', 'HERALD_ERR_TOKEN_INVALID')).toBe(
      '1',
    );
    expect(counter(families, 'herald_realtime_notifications_delivered_total')).toBe('1');
  });

  it('/healthz stays 200 while Redis is down; /readyz answers 503 JSON then, 200 once Redis is back', async () => {
    await expectHealthThroughOutage(realtime.url, redis, {
      metric: 'herald_realtime_sockets',
      health: { instanceId: 'rt-health' },
    });
  });
});

describe('Redis at maxmemory with noeviction (real processes on a Redis of their own)', () => {
  let redis: RedisServerHandle;
  let stack: Stack;
  let gateway: AppProcess;
  let closed: AppProcess;
  let worker: AppProcess;
  let realtime: AppProcess;

  beforeAll(async () => {
    redis = await startRedisServer({ args: ['--maxmemory-policy', 'noeviction'] });
    // `gateway`'s limiter lets a send through when Redis fails (`open`), so that the enqueue meets the
    // full Redis; `closed` has the default, whose limiter refuses first.
    stack = new Stack(redis.url, { HERALD_RATE_LIMIT_FAILURE: 'open' });
    [gateway, closed, worker, realtime] = await Promise.all([
      stack.start('gateway', 'gw-full'),
      stack.start('gateway', 'gw-closed', { HERALD_RATE_LIMIT_FAILURE: 'closed' }),
      stack.start('worker', 'w-full'),
      stack.start('realtime', 'rt-full'),
    ]);
  });
  afterAll(async () => {
    await stack?.dispose();
    await redis?.dispose();
  });

  const maxmemory = async (bytes: number) => {
    const client = new Redis(redis.url);
    try {
      await client.config('SET', 'maxmemory', String(bytes));
    } finally {
      client.disconnect();
    }
  };
  const ready = async (app: AppProcess) => {
    const response = await fetch(`${app.url}/readyz`);
    return { status: response.status, body: (await response.json()) as { error?: string; code?: string } };
  };
  const send = (userId: string, extra: Record<string, unknown> = {}, to = gateway, headers = {}) =>
    gatewayCall(to.url, API_KEY, 'POST', '/notify', { body: { userId, payload: {}, ...extra }, headers });

  it('/readyz is 503 naming the full Redis, /notify a 503 that says nothing was accepted; both recover once it has room', async () => {
    const before = await send('before');
    expect(before.status).toBe(202);
    await appended(gateway, 'before', before.body.id as string);
    await maxmemory(1);
    try {
      // What is stored can still be read: the inbox, a status, and a browser's handshake (its unread
      // count), none of which writes.
      const listing = await gatewayCall(gateway.url, API_KEY, 'GET', '/users/before/notifications');
      expect(listing.status).toBe(200);
      expect(listing.body).toMatchObject({ unread: { count: 1 } });
      // Also through a gateway whose limiter refuses when Redis fails (the default, closed): its
      // per-key bucket is a write Redis refuses, which does not hold up a read.
      for (const path of ['/users/before/notifications', '/users/before/preferences']) {
        const read = await gatewayCall(closed.url, API_KEY, 'GET', path);
        expect(read.status, path).toBe(200);
      }
      const write = await gatewayCall(closed.url, API_KEY, 'POST', '/users/before/notifications/read', {
        body: { all: true },
      });
      expect(write.status).toBe(503);
      const status = await gatewayCall(gateway.url, API_KEY, 'GET', `/notifications/${before.body.id}`);
      expect(status.status).toBe(200);
      expect(status.body).toMatchObject({ status: 'queued' });
      const browser = stack.client('before');
      await browser.connect(realtime.url);
      expect(browser.synced.at(-1)).toMatchObject({ unread: { count: 1 } });
      browser.disconnect();
      for (const app of [gateway, worker, realtime]) {
        await waitFor(async () => (await ready(app)).status === 503, { what: `${app.name} not ready` });
        const { body } = await ready(app);
        expect(body.code).toBe('HERALD_ERR_UNAVAILABLE');
        expect(body.error).toMatch(/out of memory.*maxmemory/);
      }
      // In an envelope, and a job of its own (a priority): Redis refused each, so no "maybe accepted";
      // and the limiter's refusal (closed) names the full Redis too, not a slow limiter.
      // With an Idempotency-Key (the SDK's backend client sends one each time), whose claim is the
      // first write Redis refuses: the same answer (it was the generic "unavailable").
      const warnings = () =>
        gateway.lines.filter((line) => line.includes('"level":40') && line.includes('maxmemory'));
      const warnedBefore = warnings().length;
      for (const [extra, to, headers] of [
        [{}, gateway, {}],
        [{ priority: 1 }, gateway, {}],
        [{}, closed, {}],
        [{}, gateway, { 'idempotency-key': 'health-oom' }],
      ] as const) {
        const refused = await send('during', extra, to, headers);
        expect(refused.status).toBe(503);
        expect(refused.body).toMatchObject({ code: 'HERALD_ERR_UNAVAILABLE' });
        expect(refused.body.maybeAccepted).toBeUndefined();
        expect(refused.body.error, JSON.stringify(headers)).toMatch(/out of memory.*nothing was accepted/i);
      }
      // Each refusal a warning naming maxmemory, as the README says (the keyed one logged none).
      await waitFor(() => warnings().length >= warnedBefore + 3, { what: 'a warning per refused enqueue' });
    } finally {
      await maxmemory(0);
    }
    for (const app of [gateway, worker, realtime])
      await waitFor(async () => (await ready(app)).status === 200, { what: `${app.name} ready again` });
    const after = await send('after');
    expect(after.status).toBe(202);
    await appended(gateway, 'after', after.body.id as string);
    expect(await stack.inboxIds('during')).toEqual([]);
  });
});

describe('a REDIS_URL whose password Redis refuses (real processes on a Redis of their own)', () => {
  let redis: RedisServerHandle;
  let stack: Stack;

  beforeAll(async () => {
    redis = await startRedisServer({ password: 'the-right-one' });
  });
  afterAll(async () => {
    await stack?.dispose();
    await redis?.dispose();
  });

  it('/readyz of every app names the refused credentials and the setting to change, not an unavailable Redis', async () => {
    const wrong = new URL(redis.url);
    wrong.password = 'a-wrong-one';
    // The stack's own clients use the right password (it cleans up after the test); the apps the wrong one.
    stack = new Stack(redis.url);
    const env = { REDIS_URL: wrong.toString() };
    // Each is started once it answers /healthz: a worker waiting for Redis never logs `listening`.
    const apps = await Promise.all([
      stack.start('gateway', 'gw-wrongpass', env, await freePort()),
      stack.start('worker', 'w-wrongpass', env, await freePort()),
      stack.start('realtime', 'rt-wrongpass', env, await freePort()),
    ]);
    for (const app of apps) {
      // It said "Redis or the queue is unavailable; nothing was accepted" (gateway) or "does not
      // answer (Connection is closed.)": the operator looked for a Redis that was down.
      await waitFor(
        async () => {
          const response = await fetch(`${app.url}/readyz`);
          const body = (await response.json()) as { error?: string; code?: string };
          return response.status === 503 && /credentials/.test(body.error ?? '') ? body : undefined;
        },
        { what: `${app.name} naming the credentials` },
      ).then((body) => {
        expect(body.code).toBe('HERALD_ERR_UNAVAILABLE');
        expect(body.error).toMatch(/WRONGPASS/);
        expect(body.error).toMatch(/REDIS_URL/);
      });
    }
    // Redis given the password the apps have: each is ready again, the refusal forgotten.
    await stack.redis.config('SET', 'requirepass', 'a-wrong-one');
    for (const app of apps)
      await waitFor(async () => (await fetch(`${app.url}/readyz`)).status === 200, {
        timeoutMs: 20_000,
        what: `${app.name} ready with the password Redis now expects`,
      });
  });
});
