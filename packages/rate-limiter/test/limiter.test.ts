import { describe, expect, it } from 'vitest';
import {
  bucketKey,
  CostExceedsCapacityError,
  RateLimiter,
  RateLimiterErrorCode,
  type RateLimiterOptions,
} from '../src/index.js';
import { START_MS } from './support/clock.js';
import { connectRedisForFile, randomPrefix } from './support/redis.js';

// The limiter's behaviour against real Redis. Runs twice: on one node and on the 3-master cluster.

const redis = await connectRedisForFile();

function limiter(options: Partial<RateLimiterOptions> & Pick<RateLimiterOptions, 'policies'>): RateLimiter {
  return new RateLimiter({ redis, keyPrefix: randomPrefix(), ...options });
}

describe('multi-policy decisions', () => {
  it('a call denied by policy B leaves policy A untouched, and names B', async () => {
    const rl = limiter({
      policies: [
        { name: 'apiKey', capacity: 10, ratePerSecond: 0.001 },
        { name: 'recipient', capacity: 2, ratePerSecond: 0.001 },
      ],
      hashTag: 'tenant-1',
    });
    const ids = { apiKey: 'key-7', recipient: 'user-42' };
    expect((await rl.consume(ids)).allowed).toBe(true);
    expect((await rl.consume(ids)).allowed).toBe(true);
    const denied = await rl.consume(ids);
    expect(denied.allowed).toBe(false);
    expect(denied.policy).toBe('recipient');
    expect(denied.policies.map((p) => [p.policy, p.allowed, p.remaining])).toEqual([
      ['apiKey', true, 8],
      ['recipient', false, 0],
    ]);
    // Many more denials: A still holds exactly 10 - 2.
    for (let i = 0; i < 20; i++) await rl.consume(ids);
    const peek = await rl.peek(ids);
    expect(peek.policies.find((p) => p.policy === 'apiKey')?.remaining).toBe(8);
    // Another recipient under the same API key is still admitted, and takes from A.
    const other = await rl.consume({ apiKey: 'key-7', recipient: 'user-43' });
    expect(other.allowed).toBe(true);
    expect(other.policies[0]?.remaining).toBe(7);
  });

  it('names the policy that needs the longest wait and reports each policy', async () => {
    let now = START_MS;
    const rl = limiter({
      policies: [
        { name: 'fast', capacity: 1, ratePerSecond: 10 },
        { name: 'slow', capacity: 1, ratePerSecond: 1 },
      ],
      clock: () => now,
      denyCache: false,
    });
    expect((await rl.consume('u')).allowed).toBe(true);
    now += 1;
    const denied = await rl.consume('u');
    expect(denied).toMatchObject({ allowed: false, policy: 'slow', retryAfterMs: 999 });
    expect(denied.policies.map((p) => p.retryAfterMs)).toEqual([99, 999]);
  });

  it('one id for every policy: per-second and per-hour limits of one user', async () => {
    const rl = limiter({
      policies: [
        { name: 'second', capacity: 5, ratePerSecond: 5 },
        { name: 'hour', capacity: 3, ratePerSecond: 3 / 3600 },
      ],
    });
    const results = [];
    for (let i = 0; i < 4; i++) results.push((await rl.consume('user-1')).allowed);
    expect(results).toEqual([true, true, true, false]);
  });

  it('rejects calls that miss a policy or name an unknown one', async () => {
    const rl = limiter({
      policies: [
        { name: 'a', capacity: 1, ratePerSecond: 1 },
        { name: 'b', capacity: 1, ratePerSecond: 1 },
      ],
      hashTag: 't',
    });
    await expect(rl.consume({ a: 'x' })).rejects.toMatchObject({ code: RateLimiterErrorCode.INVALID_KEY });
    await expect(rl.consume({ a: 'x', b: 'y', c: 'z' })).rejects.toMatchObject({
      code: RateLimiterErrorCode.INVALID_KEY,
    });
  });
});

describe('options', () => {
  it('refuses a TTL margin that is no whole number of ms, at construction, naming it', () => {
    for (const ttlMarginMs of [1.5, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() =>
        limiter({ policies: [{ name: 'a', capacity: 1, ratePerSecond: 1 }], ttlMarginMs }),
      ).toThrow(
        expect.objectContaining({
          code: RateLimiterErrorCode.INVALID_OPTIONS,
          message: expect.stringContaining('ttlMarginMs'),
        }),
      );
    }
  });

  it('refuses failure and batching settings that would misbehave, at construction, naming each', () => {
    const policies = [{ name: 'a', capacity: 1, ratePerSecond: 1 }];
    const bad: [string, Partial<RateLimiterOptions>][] = [
      // Node runs a timer longer than 2^31 - 1 ms after 1 ms: every call would time out at once.
      ['failure.timeoutMs', { failure: { timeoutMs: Number.POSITIVE_INFINITY } }],
      ['failure.timeoutMs', { failure: { timeoutMs: 2 ** 31 } }],
      ['failure.timeoutMs', { failure: { timeoutMs: 0 } }],
      ['failure.retryAfterMs', { failure: { mode: 'closed', retryAfterMs: Number.NaN } }],
      ['failure.retryAfterMs', { failure: { mode: 'closed', retryAfterMs: -1 } }],
      ['failure.expectedInstances', { failure: { mode: 'local', expectedInstances: 0 } }],
      ['batchFlushAt', { batchFlushAt: Number.NaN }],
      ['denyCache.max', { denyCache: { max: Number.NaN } }],
    ];
    for (const [name, options] of bad) {
      expect(() => limiter({ policies, ...options }), name).toThrow(
        expect.objectContaining({
          code: RateLimiterErrorCode.INVALID_OPTIONS,
          message: expect.stringContaining(name),
        }),
      );
    }
  });

  it('a key taken from expires the margin after it no longer counts, every algorithm', async () => {
    // Capacity 10 at 1/s: a bucket is full again 1 s after one is taken; a window is 10 s long (the
    // sliding one counts it until the next window ends).
    const lives = {
      'token-bucket': [1000, 1000],
      gcra: [1000, 1000],
      'fixed-window': [0, 10_000],
      'sliding-window': [10_000, 20_000],
    } as const;
    for (const [algorithm, [least, most]] of Object.entries(lives)) {
      for (const batchCalls of [true, false]) {
        const rl = limiter({
          policies: [{ name: 'a', capacity: 10, ratePerSecond: 1 }],
          algorithm: algorithm as keyof typeof lives,
          batchCalls,
          ttlMarginMs: 20_000,
        });
        expect((await rl.consume({ a: 'x' })).allowed).toBe(true);
        const ttl = await redis.pttl(rl.keyOf('a', 'x'));
        // Less what passed since the call.
        const label = `${algorithm}, batchCalls ${batchCalls}: PTTL ${ttl}`;
        expect(ttl, label).toBeGreaterThan(least + 20_000 - 2000);
        expect(ttl, label).toBeLessThanOrEqual(most + 20_000);
      }
    }
  });
});

describe('weighted cost', () => {
  it('takes the weight, and a cost above capacity is a distinct error, not a deny', async () => {
    const rl = limiter({ policies: [{ name: 'p', capacity: 10, ratePerSecond: 0.01 }] });
    expect(await rl.consume('u', 7)).toMatchObject({ allowed: true, remaining: 3 });
    expect(await rl.consume('u', 4)).toMatchObject({ allowed: false, remaining: 3 });
    expect(await rl.consume('u', 3)).toMatchObject({ allowed: true, remaining: 0 });
    const error = await rl.consume('v', 11).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CostExceedsCapacityError);
    expect(error).toMatchObject({ code: RateLimiterErrorCode.COST_EXCEEDS_CAPACITY, policy: 'p', cost: 11 });
    await expect(rl.consume('v', -1)).rejects.toMatchObject({ code: RateLimiterErrorCode.INVALID_COST });
    await expect(rl.consume('v', Number.NaN)).rejects.toMatchObject({
      code: RateLimiterErrorCode.INVALID_COST,
    });
    // Nothing was taken by the refused calls.
    expect((await rl.peek('v')).remaining).toBe(10);
  });
});

describe('keys', () => {
  const nasty = [
    'user-42',
    'ünïcødé 😀 用户',
    'a}b',
    '{a}',
    '{',
    '}',
    '}{',
    '*',
    'with spaces',
    'line\nbreak\r\n',
    '%7B',
    '%',
    '',
    'x'.repeat(10 * 1024),
  ];

  it('any string id works, and two different ids never share a bucket', async () => {
    const rl = limiter({ policies: [{ name: 'p', capacity: 1, ratePerSecond: 0.001 }] });
    for (const id of nasty) {
      expect((await rl.consume(id)).allowed, JSON.stringify(id.slice(0, 20))).toBe(true);
    }
    // Every id now has its own empty bucket; a second call on each is denied.
    for (const id of nasty) {
      expect((await rl.consume(id)).allowed, JSON.stringify(id.slice(0, 20))).toBe(false);
    }
    const keys = new Set(nasty.map((id) => rl.keyOf('p', id)));
    expect(keys.size).toBe(nasty.length);
    // `{a}` and `%7Ba%7D` are different ids and must stay different buckets.
    expect(rl.keyOf('p', '{a}')).not.toBe(rl.keyOf('p', '%7Ba%7D'));
    expect((await rl.consume('%7Ba%7D')).allowed).toBe(true);
  });

  it('nasty ids in several policies of one call share one slot (works on Cluster)', async () => {
    const rl = limiter({
      policies: [
        { name: 'a', capacity: 2, ratePerSecond: 0.001 },
        { name: 'b', capacity: 1, ratePerSecond: 0.001 },
      ],
      hashTag: (ids) => ids.a ?? '',
    });
    for (const id of nasty) {
      expect((await rl.consume({ a: id, b: `${id}}{` })).allowed).toBe(true);
      expect((await rl.consume({ a: id, b: `${id}}{` })).allowed).toBe(false);
    }
  });

  it('a plain id keeps its readable key', () => {
    expect(bucketKey('ratelimit:', 'user-42')).toBe('ratelimit:{user-42}');
  });
});

describe('TTL', () => {
  it.each(['token-bucket', 'gcra', 'fixed-window', 'sliding-window'] as const)(
    '%s: every written key expires after the time to refill fully plus the margin',
    async (algorithm) => {
      const rl = limiter({
        algorithm,
        policies: [{ name: 'p', capacity: 10, ratePerSecond: 2 }],
        ttlMarginMs: 1000,
      });
      await rl.consume('u', 4);
      const ttl = await redis.pttl(rl.keyOf('p', 'u'));
      expect(ttl).toBeGreaterThan(0);
      // Token bucket / GCRA: 4 tokens at 2/s = 2 s; windows: at most two windows of 5 s.
      const bound = algorithm === 'sliding-window' ? 10_000 : algorithm === 'fixed-window' ? 5_000 : 2_000;
      expect(ttl).toBeLessThanOrEqual(bound + 1000);
    },
  );
});

describe('state in Redis', () => {
  it.each(['token-bucket', 'gcra'] as const)(
    '%s: the one-key script and the N-key script share a bucket',
    async (algorithm) => {
      let now = START_MS;
      const rl = limiter({
        algorithm,
        policies: [{ name: 'p', capacity: 5, ratePerSecond: 1 }],
        hashTag: 'state',
        clock: () => now,
        denyCache: false,
      });
      expect((await rl.consume('u', 2)).remaining).toBe(3); // token-bucket-1 / gcra-1
      expect((await rl.consume({ p: ['u', 'v'] }, { p: [2, 1] })).policies[0]).toMatchObject({
        id: 'u',
        remaining: 1,
      }); // -n
      now += 1000;
      expect((await rl.consume('u')).remaining).toBe(1); // refilled 1, took 1
      expect((await rl.consume({ p: ['u', 'x'] })).policies[0]).toMatchObject({ id: 'u', remaining: 0 });
    },
  );

  it('token bucket: a format-1 bucket (whole tokens, before microtokens) is read as such', async () => {
    const now = START_MS;
    const rl = limiter({
      policies: [{ name: 'p', capacity: 5, ratePerSecond: 1 }],
      hashTag: 'state',
      clock: () => now,
      denyCache: false,
    });
    // struct '<Bddd': format 1, 2 tokens at now (µs), expiry in 60 s (µs).
    const formatOne = (tokens: number) => {
      const value = Buffer.alloc(25);
      value.writeUInt8(1, 0);
      value.writeDoubleLE(tokens, 1);
      value.writeDoubleLE(now * 1000, 9);
      value.writeDoubleLE((now + 60_000) * 1000, 17);
      return value;
    };
    await redis.set(rl.keyOf('p', 'w', 'state'), formatOne(2), 'PX', 60_000);
    expect((await rl.consume('w')).remaining).toBe(1); // token-bucket-1
    await redis.set(rl.keyOf('p', 'x', 'state'), formatOne(3), 'PX', 60_000);
    // -n: x (3 → 2) is the bucket with the fewest left, so it is the policy's reported state.
    expect((await rl.consume({ p: ['x', 'y'] })).policies[0]).toMatchObject({ id: 'x', remaining: 2 });
  });

  it.each(['token-bucket', 'gcra'] as const)(
    '%s: the key always outlives the refill by at least half the margin, and at most the margin',
    async (algorithm) => {
      const rl = limiter({
        algorithm,
        policies: [{ name: 'p', capacity: 20, ratePerSecond: 10 }],
        ttlMarginMs: 1000,
      });
      for (let i = 0; i < 30; i++) {
        const started = performance.now();
        const result = await rl.consume('u');
        if (!result.allowed) continue;
        const ttl = await redis.pttl(rl.keyOf('p', 'u'));
        const elapsed = performance.now() - started;
        expect(ttl + elapsed + 1).toBeGreaterThanOrEqual(result.resetAfterMs + 500);
        expect(ttl).toBeLessThanOrEqual(result.resetAfterMs + 1000);
      }
    },
  );
});

describe('peek and reset', () => {
  it.each(['token-bucket', 'gcra', 'fixed-window', 'sliding-window'] as const)(
    '%s: peek consumes nothing; reset refills',
    async (algorithm) => {
      const rl = limiter({ algorithm, policies: [{ name: 'p', capacity: 5, ratePerSecond: 0.01 }] });
      expect((await rl.peek('u')).remaining).toBe(5);
      await rl.consume('u', 3);
      expect((await rl.peek('u')).remaining).toBe(2);
      expect((await rl.peek('u')).remaining).toBe(2);
      await rl.consume('u', 2);
      expect((await rl.consume('u')).allowed).toBe(false);
      await rl.reset('u');
      expect((await rl.peek('u')).remaining).toBe(5);
      expect((await rl.consume('u')).allowed).toBe(true);
    },
  );
});

describe('local deny cache', () => {
  it('denies in-process until retryAfterMs has passed, then asks Redis again', async () => {
    let now = START_MS;
    const rl = limiter({
      policies: [{ name: 'p', capacity: 2, ratePerSecond: 1 }],
      clock: () => now,
    });
    await rl.consume('u', 2);
    const denied = await rl.consume('u');
    expect(denied).toMatchObject({ allowed: false, source: 'redis', retryAfterMs: 1000 });
    now += 400;
    expect(await rl.consume('u')).toMatchObject({ allowed: false, source: 'deny-cache', retryAfterMs: 600 });
    // A smaller cost than the denied one is not covered by the entry... here both cost 1, so covered:
    now += 599;
    expect((await rl.consume('u')).source).toBe('deny-cache');
    now += 1;
    expect(await rl.consume('u')).toMatchObject({ allowed: true, source: 'redis' });
    expect(rl.metrics().p).toEqual({ allowed: 2, denied: 1, deniedLocally: 2, fallback: 0 });
  });

  it('does not deny a cheaper call than the one Redis denied', async () => {
    let now = START_MS;
    const rl = limiter({ policies: [{ name: 'p', capacity: 10, ratePerSecond: 1 }], clock: () => now });
    await rl.consume('u', 8);
    expect(await rl.consume('u', 5)).toMatchObject({ allowed: false, source: 'redis' });
    now += 10;
    expect(await rl.consume('u', 5)).toMatchObject({ allowed: false, source: 'deny-cache' });
    expect(await rl.consume('u', 2)).toMatchObject({ allowed: true, source: 'redis' });
  });

  it('a dearer call than the one Redis denied waits for its extra cost too (before: the cheaper call’s Retry-After)', async () => {
    let now = START_MS;
    const rl = limiter({ policies: [{ name: 'p', capacity: 10, ratePerSecond: 1 }], clock: () => now });
    await rl.consume('u', 8);
    expect(await rl.consume('u', 5)).toMatchObject({ allowed: false, source: 'redis', retryAfterMs: 3000 });
    now += 10;
    // 2 tokens now, 5 at +3 s: 7 at +5 s.
    expect(await rl.consume('u', 7)).toMatchObject({
      allowed: false,
      source: 'deny-cache',
      retryAfterMs: 4990,
    });
    now += 4990;
    expect(await rl.consume('u', 7)).toMatchObject({ allowed: true, source: 'redis' });
  });

  it('a window algorithm answers a dearer call from Redis, not from the entry', async () => {
    let now = START_MS;
    const rl = limiter({
      algorithm: 'fixed-window',
      policies: [{ name: 'p', capacity: 10, ratePerSecond: 1 }],
      clock: () => now,
    });
    await rl.consume('u', 8);
    expect(await rl.consume('u', 5)).toMatchObject({ allowed: false, source: 'redis' });
    now += 10;
    expect(await rl.consume('u', 5)).toMatchObject({ allowed: false, source: 'deny-cache' });
    expect(await rl.consume('u', 7)).toMatchObject({ allowed: false, source: 'redis' });
  });

  it('an entry answers for 1 s at most: a bucket refilled by another process (herald limits reset) is asked again', async () => {
    let now = START_MS;
    const keyPrefix = randomPrefix();
    const policies = [{ name: 'p', capacity: 2, ratePerSecond: 0.01 }];
    const rl = new RateLimiter({ redis, keyPrefix, policies, clock: () => now });
    const operator = new RateLimiter({ redis, keyPrefix, policies, clock: () => now });
    await rl.consume('u', 2);
    expect(await rl.consume('u')).toMatchObject({ allowed: false, source: 'redis', retryAfterMs: 100_000 });
    await operator.reset('u');
    now += 999;
    expect(await rl.consume('u')).toMatchObject({
      allowed: false,
      source: 'deny-cache',
      retryAfterMs: 99_001,
    });
    now += 1;
    expect(await rl.consume('u')).toMatchObject({ allowed: true, source: 'redis' });
  });
});

describe('observability', () => {
  it('counts allowed, denied and denied-locally per policy and calls onDecision', async () => {
    const seen: string[] = [];
    const rl = limiter({
      policies: [
        { name: 'apiKey', capacity: 5, ratePerSecond: 0.001 },
        { name: 'recipient', capacity: 1, ratePerSecond: 0.001 },
      ],
      hashTag: 'obs',
      onDecision: (result) => seen.push(`${result.source}:${result.allowed}:${result.policy}`),
    });
    await rl.consume({ apiKey: 'k', recipient: 'u' });
    await rl.consume({ apiKey: 'k', recipient: 'u' });
    await rl.consume({ apiKey: 'k', recipient: 'u' });
    expect(rl.metrics()).toEqual({
      apiKey: { allowed: 1, denied: 0, deniedLocally: 0, fallback: 0 },
      recipient: { allowed: 1, denied: 1, deniedLocally: 1, fallback: 0 },
    });
    expect(seen).toEqual(['redis:true:recipient', 'redis:false:recipient', 'deny-cache:false:recipient']);
  });
});

describe('fixed window vs token bucket at a window edge', () => {
  it('the fixed window admits 2x its limit within one second across the edge; the token bucket never more than capacity + rate x elapsed', async () => {
    // Limit 10 per second for both. The window is [k s, (k+1) s) on the injected clock.
    const edge = 1_760_000_000_000; // a whole second
    for (const [algorithm, expected] of [
      ['fixed-window', 20],
      ['token-bucket', 10],
    ] as const) {
      let now = edge - 1000; // a full window/bucket to start
      const rl = limiter({
        algorithm,
        policies: [{ name: 'p', capacity: 10, ratePerSecond: 10 }],
        clock: () => now,
        denyCache: false,
      });
      const admittedAt: number[] = [];
      // 10 calls just before the edge and 10 just after, 20 ms apart in total.
      for (const t of [edge - 10, edge + 10]) {
        now = t;
        for (let i = 0; i < 10; i++) if ((await rl.consume('u')).allowed) admittedAt.push(now);
      }
      const elapsedS = (admittedAt.at(-1)! - admittedAt[0]!) / 1000;
      expect(admittedAt.length, algorithm).toBe(expected);
      if (algorithm === 'token-bucket') {
        expect(admittedAt.length).toBeLessThanOrEqual(10 + 10 * elapsedS);
      } else {
        expect(admittedAt.length).toBeGreaterThan(10 + 10 * elapsedS);
      }
    }
  });

  it('the token bucket stays within capacity + rate x elapsed in every interval of a random flood', async () => {
    let now = 1_760_000_000_000;
    const rl = limiter({
      policies: [{ name: 'p', capacity: 10, ratePerSecond: 10 }],
      clock: () => now,
      denyCache: false,
    });
    const admitted: number[] = [];
    for (let i = 0; i < 400; i++) {
      now += Math.floor(Math.random() * 20);
      if ((await rl.consume('u')).allowed) admitted.push(now);
    }
    for (let i = 0; i < admitted.length; i++) {
      for (let j = i; j < admitted.length; j++) {
        expect(j - i + 1).toBeLessThanOrEqual(10 + (10 * (admitted[j]! - admitted[i]!)) / 1000 + 1e-9);
      }
    }
  });

  it('the sliding window smooths the edge: at most ~1x its limit across it', async () => {
    const edge = 1_760_000_000_000;
    let now = edge - 1000;
    const rl = limiter({
      algorithm: 'sliding-window',
      policies: [{ name: 'p', capacity: 10, ratePerSecond: 10 }],
      clock: () => now,
      denyCache: false,
    });
    let admitted = 0;
    for (const t of [edge - 10, edge + 10]) {
      now = t;
      for (let i = 0; i < 10; i++) if ((await rl.consume('u')).allowed) admitted++;
    }
    expect(admitted).toBe(10);
  });
});
