import {
  type AppProcess,
  expectHealthThroughOutage,
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
  const send = (userId: string, extra: Record<string, unknown> = {}, to = gateway) =>
    gatewayCall(to.url, API_KEY, 'POST', '/notify', { body: { userId, payload: {}, ...extra } });

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
      for (const [extra, to] of [
        [{}, gateway],
        [{ priority: 1 }, gateway],
        [{}, closed],
      ] as const) {
        const refused = await send('during', extra, to);
        expect(refused.status).toBe(503);
        expect(refused.body).toMatchObject({ code: 'HERALD_ERR_UNAVAILABLE' });
        expect(refused.body.maybeAccepted).toBeUndefined();
        expect(refused.body.error).toMatch(/out of memory.*nothing was accepted/i);
      }
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
