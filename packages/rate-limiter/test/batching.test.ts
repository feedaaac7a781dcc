import { createHash } from 'node:crypto';
import { type RedisServerHandle, randomId, startRedisServer, waitFor } from '@herald/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type Algorithm,
  batchScriptSource,
  RateLimiter,
  type RateLimiterOptions,
  scriptSource,
} from '../src/index.js';
import { LIMITER_CLIENT_OPTIONS, randomPrefix } from './support/redis.js';

// `batchCalls` with the gateway's two-policy calls (sender + recipients): how many script calls a tick
// costs, where it splits, and what a failed batch does. A redis-server this file owns, so that
// INFO commandstats counts this file's commands only.

let server: RedisServerHandle;
let admin: Redis;
const clients: Redis[] = [];
beforeAll(async () => {
  server = await startRedisServer();
  admin = client();
  await waitFor(() => admin.status === 'ready', { what: 'admin client ready' });
});
afterAll(async () => {
  for (const c of clients) c.disconnect();
  await server.dispose();
});

function client(): Redis {
  const redis = new Redis(server.url, { ...LIMITER_CLIENT_OPTIONS, retryStrategy: () => 50 });
  redis.on('error', () => {});
  clients.push(redis);
  return redis;
}

async function gatewayLimiter(options: Partial<RateLimiterOptions> = {}): Promise<RateLimiter> {
  const redis = client();
  await waitFor(() => redis.status === 'ready', { what: 'limiter client ready' });
  const limiter = new RateLimiter({
    redis,
    keyPrefix: randomPrefix(),
    policies: [
      { name: 'sender', capacity: 1000, ratePerSecond: 0.001 },
      { name: 'recipient', capacity: 10, ratePerSecond: 0.001 },
    ],
    ...options,
  });
  // Load the scripts (the first EVALSHA of each answers NOSCRIPT, then EVAL) before counting.
  await limiter.consume({ sender: 'warm', recipient: 'warm' });
  await Promise.all([
    limiter.consume({ sender: 'warm', recipient: 'warm' }),
    limiter.consume({ sender: 'warm', recipient: 'warm' }),
  ]);
  await limiter.reset({ sender: 'warm', recipient: 'warm' });
  return limiter;
}

/** Calls per command since the last CONFIG RESETSTAT, e.g. { evalsha: 1, time: 1 } (script commands included). */
async function commandCalls(): Promise<Record<string, number>> {
  const calls: Record<string, number> = {};
  for (const line of (await admin.info('commandstats')).split('\n')) {
    const match = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim());
    if (match) calls[match[1]!] = Number(match[2]);
  }
  return calls;
}

describe('the scripts Redis runs', () => {
  const algorithms: Algorithm[] = ['token-bucket', 'gcra', 'fixed-window', 'sliding-window'];
  it.each(algorithms)(
    '%s: the expanded sources (their --#include lines put in place), by SHA1',
    async (algorithm) => {
      const redis = client();
      await waitFor(() => redis.status === 'ready', { what: 'limiter client ready' });
      const limiter = (...names: string[]) =>
        new RateLimiter({
          redis,
          algorithm,
          keyPrefix: randomPrefix(),
          policies: names.map((name) => ({ name, capacity: 10, ratePerSecond: 1 })),
        });
      // One bucket (the -1 script where the algorithm has one), two (the -n script), two calls of one
      // tick (the -m script where it has one).
      expect((await limiter('p').consume('a')).source).toBe('redis');
      const two = limiter('p', 'q');
      expect((await two.consume({ p: 'a', q: 'b' })).source).toBe('redis');
      await Promise.all([two.consume({ p: 'a', q: 'b' }), two.consume({ p: 'c', q: 'd' })]);
      const sources = new Set([
        scriptSource(algorithm, 1),
        scriptSource(algorithm),
        batchScriptSource(algorithm),
      ]);
      const shas = [...sources]
        .filter((source) => source !== undefined)
        .map((source) => createHash('sha1').update(source).digest('hex'));
      expect(shas.length).toBe(algorithm === 'token-bucket' || algorithm === 'gcra' ? 3 : 1);
      expect(await admin.script('EXISTS', ...shas)).toEqual(shas.map(() => 1));
    },
  );
});

describe('batchCalls: multi-bucket calls of one tick', () => {
  it('50 two-policy calls of one tick are one EVALSHA and one TIME, decided in call order', async () => {
    const limiter = await gatewayLimiter({ batchFlushAt: 100 });
    const sender = randomId('sender');
    await admin.config('RESETSTAT');
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => limiter.consume({ sender, recipient: `user-${i}` })),
    );
    const calls = await commandCalls();
    expect(calls.evalsha).toBe(1);
    expect(calls.eval).toBeUndefined();
    expect(calls.time).toBe(1);
    // Each call saw the previous ones' consumption of the shared sender bucket.
    expect(results.map((r) => r.policies[0]!.remaining)).toEqual(
      Array.from({ length: 50 }, (_, i) => 999 - i),
    );
    expect(results.every((r) => r.allowed && r.source === 'redis')).toBe(true);
    expect(limiter.metrics()).toMatchObject({
      sender: { allowed: 53, denied: 0 },
      recipient: { allowed: 53, denied: 0 },
    });
  });

  it('a bucket shared by the calls of a batch is read once and written once, and keeps an expiry', async () => {
    const keyPrefix = randomPrefix();
    const limiter = await gatewayLimiter({ batchFlushAt: 100, keyPrefix, ttlMarginMs: 60_000 });
    const sender = randomId('sender');
    for (const round of [0, 1]) {
      await admin.config('RESETSTAT');
      const results = await Promise.all(
        Array.from({ length: 50 }, (_, i) => limiter.consume({ sender, recipient: `user-${round}-${i}` })),
      );
      // The sender's bucket once, each recipient's once: 51 GETs and 51 SETs, not 100 of each.
      const calls = await commandCalls();
      expect([calls.evalsha, calls.get, calls.set]).toEqual([1, 51, 51]);
      expect(results.map((r) => r.policies[0]!.remaining)).toEqual(
        Array.from({ length: 50 }, (_, i) => 999 - 50 * round - i),
      );
      // Every bucket written (the sender's new in round 0, kept in round 1) outlives its refill, and no
      // longer than refill + margin.
      const keys = await admin.keys(`${keyPrefix}*`);
      expect(keys.length).toBe(1 + 50 * (round + 1)); // the sender, the recipients (the warm-up reset its own)
      for (const key of keys) {
        const ttl = await admin.pttl(key);
        expect(ttl, key).toBeGreaterThan(0);
      }
      const last = results.at(-1)!.policies[0]!;
      const senderTtl = await admin.pttl(keys.find((k) => k.includes(sender)) ?? '');
      expect(senderTtl).toBeGreaterThan(last.resetAfterMs);
      expect(senderTtl).toBeLessThanOrEqual(last.resetAfterMs + 60_000);
    }
    // Read back alone (the -n script, no cache): the batch's writes are what Redis holds.
    expect((await limiter.consume({ sender, recipient: 'user-after' })).policies[0]!.remaining).toBe(899);
  });

  it('by default a batch leaves as soon as it holds 16 calls: 50 calls are 4 EVALSHAs, still in call order', async () => {
    const limiter = await gatewayLimiter();
    const sender = randomId('sender');
    await admin.config('RESETSTAT');
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => limiter.consume({ sender, recipient: `user-${i}` })),
    );
    const calls = await commandCalls();
    expect(calls.evalsha).toBe(4); // 16, 16, 16, then the last 2 at the end of the turn
    expect(calls.time).toBe(4);
    expect(results.map((r) => r.policies[0]!.remaining)).toEqual(
      Array.from({ length: 50 }, (_, i) => 999 - i),
    );
    expect(results.every((r) => r.allowed && r.source === 'redis')).toBe(true);
  });

  it('a recipient denied in one call and allowed in a later call of the same tick, each all or nothing', async () => {
    const limiter = await gatewayLimiter();
    const sender = randomId('sender');
    const [first, second, third] = await Promise.all([
      limiter.consume({ sender, recipient: ['a', 'b'] }, { sender: 1, recipient: [9, 1] }), // a 10 -> 1
      limiter.consume({ sender, recipient: ['c', 'a'] }, { sender: 1, recipient: [1, 2] }), // a has 1: denied
      limiter.consume({ sender, recipient: ['a', 'c'] }, { sender: 1, recipient: [1, 10] }), // a 1 -> 0, c full
    ]);
    expect(first).toMatchObject({ allowed: true });
    expect(second).toMatchObject({ allowed: false, policy: 'recipient', deniedId: 'a' });
    expect(third).toMatchObject({ allowed: true });
    // The denied call took nothing: c was still full for the third call, and the sender paid twice.
    expect(third.policies[0]).toMatchObject({ policy: 'sender', remaining: 998 });
    expect(third.policies[1]).toMatchObject({ id: 'a', remaining: 0 });
    expect(limiter.metrics().recipient).toMatchObject({ allowed: 5, denied: 1 });
  });

  it('splits beyond 100 calls or 256 buckets, keeping call order', async () => {
    const limiter = await gatewayLimiter({
      policies: [
        { name: 'sender', capacity: 1000, ratePerSecond: 0.001 },
        { name: 'recipient', capacity: 10, ratePerSecond: 0.001 },
      ],
      batchFlushAt: 100,
    });
    const sender = randomId('sender');
    await admin.config('RESETSTAT');
    const many = await Promise.all(
      Array.from({ length: 150 }, (_, i) => limiter.consume({ sender, recipient: `user-${i}` })),
    );
    expect((await commandCalls()).evalsha).toBe(2); // 100 calls, then 50
    expect(many.map((r) => r.policies[0]!.remaining)).toEqual(Array.from({ length: 150 }, (_, i) => 999 - i));

    // Batch requests of 1 sender + 100 recipients (101 buckets): two fit in 256, the third goes alone.
    const recipients = Array.from({ length: 100 }, (_, i) => `batch-${i}`);
    await admin.config('RESETSTAT');
    const batches = await Promise.all(
      [0, 1, 2].map(() => limiter.consume({ sender, recipient: recipients })),
    );
    expect((await commandCalls()).evalsha).toBe(2);
    expect(batches.map((r) => [r.allowed, r.policies[0]!.remaining])).toEqual([
      [true, 849],
      [true, 848],
      [true, 847],
    ]);
    expect(batches.map((r) => r.remaining)).toEqual([9, 8, 7]);
  });

  it('batchSchedule: calls of several turns go in one EVALSHA when the app sends them; a send of a batch already gone full does nothing', async () => {
    const sends: (() => void)[] = [];
    // The warm-up's calls are sent in the next turn; from then on the test sends.
    let warming = true;
    const limiter = await gatewayLimiter({
      batchFlushAt: 4,
      batchSchedule: (send) => (warming ? setImmediate(send) : sends.push(send)),
    });
    warming = false;
    const sender = randomId('sender');
    await admin.config('RESETSTAT');
    let answered = 0;
    const first = [0, 1, 2].map((i) => {
      const decision = limiter.consume({ sender, recipient: `user-${i}` });
      void decision.then(() => answered++);
      return decision;
    });
    // Turns go by, Redis answers other clients: nothing is decided until the batch is sent.
    for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setImmediate(resolve));
    expect(await admin.ping()).toBe('PONG');
    expect(answered).toBe(0);
    expect(sends).toHaveLength(1);
    sends[0]?.();
    const results = await Promise.all(first);
    expect((await commandCalls()).evalsha).toBe(1);
    expect(results.map((r) => r.policies[0]!.remaining)).toEqual([999, 998, 997]);

    // A batch that fills (batchFlushAt 4) leaves at once; its scheduled send, called later, sends
    // nothing, and the next batch has a send of its own.
    await admin.config('RESETSTAT');
    const full = [3, 4, 5, 6].map((i) => limiter.consume({ sender, recipient: `user-${i}` }));
    expect((await Promise.all(full)).every((r) => r.allowed && r.source === 'redis')).toBe(true);
    expect(sends).toHaveLength(2);
    sends[1]?.();
    const next = limiter.consume({ sender, recipient: 'user-7' });
    expect(sends).toHaveLength(3);
    sends[2]?.();
    expect((await next).policies[0]!.remaining).toBe(992);
    expect((await commandCalls()).evalsha).toBe(2);
  });

  it('a batch that times out gives each of its calls the failure mode, in call order, counted per call', async () => {
    const limiter = await gatewayLimiter({
      policies: [
        { name: 'sender', capacity: 3, ratePerSecond: 0.001 },
        { name: 'recipient', capacity: 10, ratePerSecond: 0.001 },
      ],
      failure: { mode: 'local', timeoutMs: 100, expectedInstances: 1 },
    });
    const sender = randomId('sender');
    // Redis stops serving clients for 1.5 s: the batch's script call hangs past the timeout.
    await admin.call('CLIENT', 'PAUSE', '1500', 'ALL');
    const results = await Promise.all(
      Array.from({ length: 5 }, (_, i) => limiter.consume({ sender, recipient: [`u${i}`, 'shared'] })),
    );
    expect(results.map((r) => r.source)).toEqual(Array(5).fill('fallback'));
    expect(results.map((r) => r.fallback?.reason)).toEqual(Array(5).fill('timeout'));
    // The in-process buckets decide each call all or nothing, in order: the sender has 3.
    expect(results.map((r) => r.allowed)).toEqual([true, true, true, false, false]);
    expect(limiter.metrics()).toMatchObject({ sender: { fallback: 5 }, recipient: { fallback: 5 } });
    await waitFor(async () => (await limiter.consume({ sender, recipient: 'x' })).source === 'redis', {
      timeoutMs: 10_000,
      what: 'Redis answers again',
    });
  });
});
