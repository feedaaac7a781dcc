import { type RedisServerHandle, randomId, startRedisServer, waitFor } from '@herald/testing';
import { Redis, type RedisOptions } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type FailureMode,
  RateLimiter,
  type RateLimiterOptions,
  RateLimiterUnavailableError,
} from '../src/index.js';
import { randomPrefix } from './support/redis.js';

// Redis stopped mid-run, and Redis too slow: a redis-server this file owns, on its own port.

let server: RedisServerHandle;
const clients: Redis[] = [];
beforeAll(async () => {
  server = await startRedisServer();
});
afterAll(async () => {
  for (const client of clients) client.disconnect();
  await server.dispose();
});

function client(options: RedisOptions = {}): Redis {
  const redis = new Redis(server.url, {
    enableOfflineQueue: false,
    autoResendUnfulfilledCommands: false,
    maxRetriesPerRequest: 1,
    // Reconnect quickly so that the test sees recovery soon after the restart.
    retryStrategy: () => 50,
    ...options,
  });
  redis.on('error', () => {});
  clients.push(redis);
  return redis;
}

/** A limiter with a client and a key prefix of its own, and a client for the test's own commands, both connected. */
async function limiterAndAdmin(
  options: Omit<RateLimiterOptions, 'redis' | 'keyPrefix'>,
): Promise<{ limiter: RateLimiter; admin: Redis }> {
  const redis = client();
  const admin = client();
  await waitFor(() => redis.status === 'ready' && admin.status === 'ready', { what: 'clients ready' });
  return { limiter: new RateLimiter({ redis, keyPrefix: randomPrefix(), ...options }), admin };
}

function limiterFor(redis: Redis, mode: FailureMode, prefix: string): RateLimiter {
  return new RateLimiter({
    redis,
    keyPrefix: prefix,
    policies: [{ name: 'p', capacity: 10, ratePerSecond: 0.001 }],
    failure: { mode, timeoutMs: 200, expectedInstances: 2 },
  });
}

describe('Redis stopped mid-run', () => {
  it('each failure mode does what it says, and decisions are shared again after the restart', async () => {
    const prefix = randomPrefix();
    // Two "instances" (two clients) per mode; the default offline queue is left ON for instance b, to
    // show that the limiter never lets ioredis queue a consume while the connection is down.
    const a = client();
    const b = client({
      enableOfflineQueue: true,
      autoResendUnfulfilledCommands: true,
      maxRetriesPerRequest: 20,
    });
    const modes = ['closed', 'open', 'local', 'throw'] as const;
    const limiters = Object.fromEntries(modes.map((m) => [m, limiterFor(a, m, `${prefix}${m}:`)]));
    const others = Object.fromEntries(modes.map((m) => [m, limiterFor(b, m, `${prefix}${m}:`)]));
    await waitFor(() => a.status === 'ready' && b.status === 'ready', { what: 'both clients ready' });

    for (const mode of modes) expect((await limiters[mode]!.consume('u')).source).toBe('redis');

    await server.stop();
    await waitFor(() => a.status !== 'ready' && b.status !== 'ready', { what: 'clients to notice' });

    const closed = await limiters.closed!.consume('u');
    expect(closed).toMatchObject({ allowed: false, source: 'fallback', fallback: { mode: 'closed' } });
    expect(closed.retryAfterMs).toBeGreaterThan(0);

    expect(await limiters.open!.consume('u')).toMatchObject({ allowed: true, source: 'fallback' });

    // local: capacity 10 / 2 expected instances = 5 per instance while Redis is away.
    const local = [];
    for (let i = 0; i < 8; i++) local.push((await limiters.local!.consume('u')).allowed);
    expect(local).toEqual([true, true, true, true, true, false, false, false]);
    const localB = [];
    for (let i = 0; i < 6; i++) localB.push((await others.local!.consume('u')).allowed);
    expect(localB).toEqual([true, true, true, true, true, false]);

    await expect(limiters.throw!.consume('u')).rejects.toBeInstanceOf(RateLimiterUnavailableError);
    await expect(limiters.throw!.peek('u')).rejects.toBeInstanceOf(RateLimiterUnavailableError);

    // Instance b tries too, with its offline queue on: nothing may be queued for later.
    for (let i = 0; i < 5; i++) await others.closed!.consume('stale');
    expect(limiters.closed!.metrics().p?.fallback).toBe(1);

    await server.restart();
    // Recovery without restarting anything: the same limiter objects answer from Redis again.
    for (const mode of modes) {
      await waitFor(async () => (await limiters[mode]!.consume('v')).source === 'redis', {
        timeoutMs: 15_000,
        what: `${mode} limiter back on Redis`,
      });
      await waitFor(async () => (await others[mode]!.consume('w')).source === 'redis', {
        timeoutMs: 15_000,
        what: `${mode} limiter of instance b back on Redis`,
      });
    }
    // Shared again: what instance a takes, instance b sees.
    const before = (await others.local!.peek('shared')).remaining;
    await limiters.local!.consume('shared', 3);
    expect((await others.local!.peek('shared')).remaining).toBe(before - 3);
    // No stale consume was replayed after the reconnect: 'stale' is untouched (this server keeps no data
    // across restarts, so any token missing would have been taken by a replay).
    expect((await others.closed!.peek('stale')).remaining).toBe(10);
  });
});

describe('Redis stopped: several ids for one policy (a batch)', () => {
  it('closed denies, open allows, local decides the batch all or nothing in-process, counted per policy', async () => {
    const server2 = await startRedisServer();
    try {
      const redis = new Redis(server2.url, {
        enableOfflineQueue: false,
        autoResendUnfulfilledCommands: false,
        maxRetriesPerRequest: 1,
        retryStrategy: () => 50,
      });
      redis.on('error', () => {});
      clients.push(redis);
      await waitFor(() => redis.status === 'ready', { what: 'client ready' });
      const make = (mode: FailureMode) =>
        new RateLimiter({
          redis,
          keyPrefix: randomPrefix(),
          policies: [
            { name: 'sender', capacity: 100, ratePerSecond: 0.001 },
            { name: 'recipient', capacity: 2, ratePerSecond: 0.001 },
          ],
          failure: { mode, timeoutMs: 200, expectedInstances: 1 },
        });
      const closed = make('closed');
      const open = make('open');
      const local = make('local');
      await server2.stop();
      await waitFor(() => redis.status !== 'ready', { what: 'client to notice' });

      const batch = { sender: 'k', recipient: ['x', 'y', 'x'] };
      const c = await closed.consume(batch);
      expect(c).toMatchObject({ allowed: false, source: 'fallback', fallback: { mode: 'closed' } });
      expect(c.deniedId).toBeUndefined();
      expect(c.policies.map((p) => p.policy)).toEqual(['sender', 'recipient']);

      const o = await open.consume(batch);
      expect(o).toMatchObject({ allowed: true, source: 'fallback', fallback: { mode: 'open' } });
      // The sender pays 1 (the default cost), x is charged 2 (merged): its state is the most constrained.
      expect(o.policies.map((p) => [p.policy, p.id, p.remaining])).toEqual([
        ['sender', 'k', 99],
        ['recipient', 'x', 0],
      ]);

      // local: x takes 2 (both its tokens), y 1.
      expect((await local.consume(batch)).allowed).toBe(true);
      // x is empty: this batch is refused whole, so z and y keep their tokens.
      const refused = await local.consume({ sender: 'k', recipient: ['z', 'y', 'x'] });
      expect(refused).toMatchObject({
        allowed: false,
        policy: 'recipient',
        deniedId: 'x',
        source: 'fallback',
      });
      expect((await local.consume({ sender: 'k', recipient: ['z', 'z', 'y'] })).allowed).toBe(true);
      expect((await local.consume({ sender: 'k', recipient: ['y'] })).allowed).toBe(false);
      // Counted once per call on every policy, not once per id.
      expect(local.metrics()).toEqual({
        sender: { allowed: 0, denied: 0, deniedLocally: 0, fallback: 4 },
        recipient: { allowed: 0, denied: 0, deniedLocally: 0, fallback: 4 },
      });
    } finally {
      await server2.dispose();
    }
  });
});

describe('Redis too slow', () => {
  it('answers by the failure mode after the timeout, and returns to Redis by itself', async () => {
    const { limiter, admin } = await limiterAndAdmin({
      policies: [{ name: 'p', capacity: 10, ratePerSecond: 1 }],
      failure: { mode: 'open', timeoutMs: 100 },
    });
    expect((await limiter.consume('u')).source).toBe('redis');
    // Redis stops serving clients for 1.5 s: the script call hangs.
    await admin.call('CLIENT', 'PAUSE', '1500', 'ALL');
    const slow = await limiter.consume('u');
    expect(slow).toMatchObject({
      allowed: true,
      source: 'fallback',
      fallback: { mode: 'open', reason: 'timeout' },
    });
    await waitFor(async () => (await limiter.consume('u')).source === 'redis', {
      timeoutMs: 10_000,
      what: 'Redis answers again',
    });
  });
});

describe('a busy event loop', () => {
  it('a reply that came before the timeout is the decision, though the timer is due when the loop gets to it (before: the fallback decided: a flood of one tenant turned the others’ sends into 503s)', async () => {
    for (const batchCalls of [true, false]) {
      const { limiter: each } = await limiterAndAdmin({
        policies: [{ name: 'p', capacity: 10, ratePerSecond: 1 }],
        failure: { mode: 'closed', timeoutMs: 100 },
        batchCalls,
      });
      expect((await each.consume('warm')).source).toBe('redis');
      const deciding = each.consume('u');
      // The process busy for 300 ms (CPU-bound requests of another tenant): Redis answers meanwhile, and
      // its reply waits in the socket while the 100 ms timer is overdue.
      await new Promise((resolve) => setImmediate(resolve));
      const until = Date.now() + 300;
      while (Date.now() < until) {
        // busy
      }
      expect(await deciding, `batchCalls ${batchCalls}`).toMatchObject({ source: 'redis', allowed: true });
    }
  });
});

describe('a call that times out and runs later', () => {
  // Redis stops serving clients for 600 ms (CLIENT PAUSE): the calls sent meanwhile time out, are decided
  // by the failure mode, then run when Redis resumes and take their tokens. Those the failure mode refused
  // (nothing accepted for them) are given back; those it accepted stay taken.
  const cases = [
    { mode: 'closed', algorithm: 'token-bucket', batchCalls: true, expected: 10 },
    { mode: 'closed', algorithm: 'token-bucket', batchCalls: false, expected: 10 },
    { mode: 'closed', algorithm: 'gcra', batchCalls: true, expected: 10 },
    { mode: 'throw', algorithm: 'token-bucket', batchCalls: true, expected: 10 },
    // 8 calls: the local share (10 / 2) allows 5, refuses 3: Redis keeps the 5 accepted.
    { mode: 'local', algorithm: 'token-bucket', batchCalls: true, expected: 5 },
    { mode: 'open', algorithm: 'token-bucket', batchCalls: true, expected: 2 },
  ] as const;
  for (const { mode, algorithm, batchCalls, expected } of cases) {
    it(`${mode}, ${algorithm}${batchCalls ? '' : ', unbatched'}: the bucket keeps ${expected} of 10 after 8 timed-out calls`, async () => {
      const { limiter, admin } = await limiterAndAdmin({
        policies: [{ name: 'p', capacity: 10, ratePerSecond: 0.001 }],
        algorithm,
        batchCalls,
        failure: { mode, timeoutMs: 100, expectedInstances: 2 },
      });
      expect((await limiter.peek('u')).remaining).toBe(10);
      await admin.call('CLIENT', 'PAUSE', '600', 'ALL');
      const results = await Promise.all(
        Array.from({ length: 8 }, () => limiter.consume('u').catch((error: unknown) => error)),
      );
      for (const result of results) {
        if (mode === 'throw') expect(result).toBeInstanceOf(RateLimiterUnavailableError);
        else expect(result).toMatchObject({ source: 'fallback' });
      }
      await waitFor(async () => (await limiter.peek('u').catch(() => undefined))?.remaining === expected, {
        timeoutMs: 10_000,
        what: `the bucket at ${expected}`,
      });
    });
  }
});

describe('local deny cache', () => {
  it('while a key is denied, 1,000 further calls make 0 Redis commands', async () => {
    const { limiter, admin } = await limiterAndAdmin({
      // 0.01 token/s: a denied call waits 100 s, far beyond this test.
      policies: [{ name: 'p', capacity: 2, ratePerSecond: 0.01 }],
    });
    const id = randomId('user');
    await limiter.consume(id, 2);
    expect(await limiter.consume(id)).toMatchObject({ allowed: false, source: 'redis' });

    await admin.config('RESETSTAT');
    const results = await Promise.all(Array.from({ length: 1000 }, () => limiter.consume(id)));
    expect(results.every((r) => !r.allowed && r.source === 'deny-cache')).toBe(true);

    const stats = (await admin.info('commandstats'))
      .split('\n')
      .filter((line) => line.startsWith('cmdstat_'))
      .map((line) => line.trim());
    // Only the admin's own CONFIG RESETSTAT and INFO may have run since the reset.
    const others = stats.filter(
      (line) => !/^cmdstat_(config\||info:)/.test(line) && !line.startsWith('cmdstat_info'),
    );
    expect(others).toEqual([]);
    expect(limiter.metrics().p).toMatchObject({ denied: 1, deniedLocally: 1000 });
  });
});
