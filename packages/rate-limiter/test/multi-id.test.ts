import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  CostExceedsCapacityError,
  RateLimiter,
  RateLimiterErrorCode,
  type RateLimiterOptions,
} from '../src/index.js';
import { START_MS } from './support/clock.js';
import { type ExactBucket, exactRate, exactStep } from './support/exact-model.js';
import { connectRedisForFile, onCluster, randomPrefix } from './support/redis.js';

// Several ids for one policy in one atomic call (POST /notify/batch: the sender's bucket and every
// recipient's). Runs on one node and on the 3-master cluster (with a hash tag, which Cluster needs).

const redis = await connectRedisForFile();

function batchLimiter(options: Partial<RateLimiterOptions> = {}, tagged = true): RateLimiter {
  return new RateLimiter({
    redis,
    keyPrefix: randomPrefix(),
    policies: [
      { name: 'sender', capacity: 10, ratePerSecond: 0.001 },
      { name: 'recipient', capacity: 2, ratePerSecond: 0.001 },
    ],
    ...(tagged ? { hashTag: 'batch' } : {}),
    ...options,
  });
}

async function remaining(rl: RateLimiter, policy: 'sender' | 'recipient', id: string): Promise<number> {
  const peek = await rl.peek({ sender: policy === 'sender' ? id : 'peek', recipient: id });
  return peek.policies.find((p) => p.policy === policy)!.remaining;
}

describe.each(['token-bucket', 'gcra'] as const)('%s: several ids for one policy', (algorithm) => {
  it('a batch where one recipient lacks tokens consumes from no recipient and not from the sender', async () => {
    const rl = batchLimiter({ algorithm });
    // r2 spends its 2 tokens (cost 0 on the sender).
    expect((await rl.consume({ sender: 'k', recipient: 'r2' }, { sender: 0, recipient: 2 })).allowed).toBe(
      true,
    );

    const denied = await rl.consume(
      { sender: 'k', recipient: ['r1', 'r2', 'r3'] },
      { sender: 3, recipient: 1 },
    );
    expect(denied).toMatchObject({ allowed: false, policy: 'recipient', deniedId: 'r2', source: 'redis' });
    expect(denied.retryAfterMs).toBeGreaterThan(0);
    // One state per policy; the recipient's is the bucket that refused.
    expect(denied.policies.map((p) => [p.policy, p.id, p.allowed, p.remaining])).toEqual([
      ['sender', 'k', true, 10],
      ['recipient', 'r2', false, 0],
    ]);

    expect(await remaining(rl, 'sender', 'k')).toBe(10);
    expect(await remaining(rl, 'recipient', 'r1')).toBe(2);
    expect(await remaining(rl, 'recipient', 'r3')).toBe(2);

    // Without r2 the batch fits, and takes from every bucket.
    const allowed = await rl.consume(
      { sender: 'k', recipient: ['r1', 'r3'] },
      { sender: 2, recipient: [2, 1] },
    );
    expect(allowed).toMatchObject({ allowed: true, retryAfterMs: 0 });
    expect(allowed.deniedId).toBeUndefined();
    // The recipient's state is its most constrained id: r1, with 0 left.
    expect(allowed.policies.map((p) => [p.policy, p.id, p.remaining])).toEqual([
      ['sender', 'k', 8],
      ['recipient', 'r1', 0],
    ]);
    expect(allowed.policy).toBe('recipient');
    expect(await remaining(rl, 'sender', 'k')).toBe(8);
    expect(await remaining(rl, 'recipient', 'r1')).toBe(0);
    expect(await remaining(rl, 'recipient', 'r3')).toBe(1);
  });

  it('the same id twice is one bucket charged the summed cost', async () => {
    const rl = batchLimiter({ algorithm, denyCache: false });
    // b keeps 1 token. Checked one by one, [b, b] would pass twice on that token; merged it costs 2.
    await rl.consume({ sender: 'k', recipient: 'b' }, { sender: 0, recipient: 1 });
    const twice = await rl.consume({ sender: 'k', recipient: ['b', 'b'] });
    expect(twice).toMatchObject({ allowed: false, deniedId: 'b' });
    expect(await remaining(rl, 'recipient', 'b')).toBe(1);
    expect(await remaining(rl, 'sender', 'k')).toBe(10);

    // [a, c, a] with costs [1, 1, 1]: a is charged 2, c 1, the sender 3.
    expect(
      (await rl.consume({ sender: 'k', recipient: ['a', 'c', 'a'] }, { sender: 3, recipient: 1 })).allowed,
    ).toBe(true);
    expect(await remaining(rl, 'recipient', 'a')).toBe(0);
    expect(await remaining(rl, 'recipient', 'c')).toBe(1);
    expect(await remaining(rl, 'sender', 'k')).toBe(7);

    // The summed cost is checked against capacity: a distinct error, nothing taken.
    const error = await rl.consume({ sender: 'k', recipient: ['d', 'd', 'd'] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CostExceedsCapacityError);
    expect(error).toMatchObject({ policy: 'recipient', cost: 3, capacity: 2 });
    expect(await remaining(rl, 'recipient', 'd')).toBe(2);
  });
});

describe('several ids: the local deny cache and the counters', () => {
  it('remembers the bucket that refused, denies later batches that contain it, and counts per policy', async () => {
    let now = START_MS;
    const seen: string[] = [];
    const rl = batchLimiter({
      policies: [
        { name: 'sender', capacity: 100, ratePerSecond: 1 },
        { name: 'recipient', capacity: 2, ratePerSecond: 1 },
      ],
      clock: () => now,
      onDecision: (r) => seen.push(`${r.source}:${r.allowed}:${r.policy}:${r.deniedId ?? '-'}`),
    });
    // One allowed batch of 3 recipients: one decision, counted once per policy (not per id).
    expect((await rl.consume({ sender: 'k', recipient: ['a', 'b', 'b'] })).allowed).toBe(true);
    expect(rl.metrics()).toEqual({
      sender: { allowed: 1, denied: 0, deniedLocally: 0, fallback: 0 },
      recipient: { allowed: 1, denied: 0, deniedLocally: 0, fallback: 0 },
    });
    // b is empty now: Redis denies, and b (only b) goes into the deny cache.
    const denied = await rl.consume({ sender: 'k', recipient: ['c', 'b'] });
    expect(denied).toMatchObject({ allowed: false, source: 'redis', deniedId: 'b', retryAfterMs: 1000 });
    now += 100;
    const local = await rl.consume({ sender: 'k', recipient: ['d', 'e', 'b'] });
    expect(local).toMatchObject({
      allowed: false,
      source: 'deny-cache',
      policy: 'recipient',
      deniedId: 'b',
      retryAfterMs: 900,
    });
    expect(local.policies).toEqual([
      {
        policy: 'recipient',
        id: 'b',
        allowed: false,
        limit: 2,
        remaining: 0,
        retryAfterMs: 900,
        resetAfterMs: 1900,
      },
    ]);
    // A batch without b asks Redis and is allowed: c was not consumed by the denied batch.
    expect(await rl.consume({ sender: 'k', recipient: ['c', 'd'] }, { recipient: [2, 1] })).toMatchObject({
      allowed: true,
      source: 'redis',
    });
    expect(rl.metrics()).toEqual({
      sender: { allowed: 2, denied: 0, deniedLocally: 0, fallback: 0 },
      recipient: { allowed: 2, denied: 1, deniedLocally: 1, fallback: 0 },
    });
    expect(seen).toEqual([
      'redis:true:recipient:-',
      'redis:false:recipient:b',
      'deny-cache:false:recipient:b',
      'redis:true:recipient:-',
    ]);
  });

  it('a cheaper merged cost than the one Redis denied is not denied locally', async () => {
    let now = START_MS;
    const rl = batchLimiter({
      policies: [
        { name: 'sender', capacity: 100, ratePerSecond: 1 },
        { name: 'recipient', capacity: 4, ratePerSecond: 1 },
      ],
      clock: () => now,
    });
    await rl.consume({ sender: 'k', recipient: 'a' }, { recipient: 3 });
    // a has 1: [a, a] costs 2 and is denied by Redis; then a single a (cost 1) must still reach Redis.
    expect(await rl.consume({ sender: 'k', recipient: ['a', 'a'] })).toMatchObject({
      allowed: false,
      source: 'redis',
    });
    now += 1;
    expect(await rl.consume({ sender: 'k', recipient: ['x', 'a', 'a'] })).toMatchObject({
      source: 'deny-cache',
    });
    expect(await rl.consume({ sender: 'k', recipient: ['x', 'a'] })).toMatchObject({
      allowed: true,
      source: 'redis',
    });
  });
});

describe('several ids: arguments', () => {
  it('refuses empty arrays, non-string ids and costs that do not pair with the ids', async () => {
    const rl = batchLimiter();
    await expect(rl.consume({ sender: 'k', recipient: [] })).rejects.toMatchObject({
      code: RateLimiterErrorCode.INVALID_KEY,
    });
    await expect(rl.consume({ sender: 'k', recipient: ['a', 7 as unknown as string] })).rejects.toMatchObject(
      {
        code: RateLimiterErrorCode.INVALID_KEY,
      },
    );
    await expect(
      rl.consume({ sender: 'k', recipient: ['a', 'b'] }, { recipient: [1] }),
    ).rejects.toMatchObject({
      code: RateLimiterErrorCode.INVALID_COST,
    });
    await expect(rl.consume({ sender: 'k', recipient: ['a'] }, { sender: [1] })).rejects.toMatchObject({
      code: RateLimiterErrorCode.INVALID_COST,
    });
    await expect(
      rl.consume({ sender: 'k', recipient: ['a', 'b'] }, { recipient: [1, -1] }),
    ).rejects.toMatchObject({
      code: RateLimiterErrorCode.INVALID_COST,
    });
    // Nothing was taken by any of them.
    expect(await remaining(rl, 'recipient', 'a')).toBe(2);
  });

  it('a hashTag function sees the single-id policies only, and keeps every key of the batch in one slot', async () => {
    const tags: Record<string, unknown>[] = [];
    const rl = batchLimiter({
      hashTag: (ids) => {
        tags.push({ ...ids });
        return ids.sender ?? '';
      },
    });
    expect((await rl.consume({ sender: 'key-A', recipient: ['u1', 'u2', 'u3'] })).allowed).toBe(true);
    expect(tags).toEqual([{ sender: 'key-A' }]);
    if (onCluster()) {
      const slots = new Set(
        await Promise.all(
          ['u1', 'u2', 'u3']
            .map((u) => rl.keyOf('recipient', u, 'key-A'))
            .concat(rl.keyOf('sender', 'key-A', 'key-A'))
            .map((key) => redis.call('CLUSTER', 'KEYSLOT', key)),
        ),
      );
      expect(slots.size).toBe(1);
    }
  });

  // Registered in the single-node project only (on a Cluster this layout is refused, tested above).
  (onCluster() ? () => {} : it)(
    'single node: the gateway layout (no hashTag, every key tagged by its own id) works for batches',
    async () => {
      const rl = batchLimiter({}, false);
      expect(rl.keyOf('recipient', 'u1')).toMatch(/recipient:\{u1\}$/);
      expect(
        (await rl.consume({ sender: 'k', recipient: ['u1', 'u2'] }, { sender: 2, recipient: 1 })).allowed,
      ).toBe(true);
      expect(await redis.exists(rl.keyOf('recipient', 'u1'), rl.keyOf('recipient', 'u2'))).toBe(2);
    },
  );
});

describe('several ids = the token-bucket model of each distinct id, all or nothing', () => {
  it('matches on random batches with duplicates (fast-check, injected clock)', async () => {
    const capacity = 3;
    const rate = 2;
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            dtMs: fc.integer({ min: 0, max: 1500 }),
            batch: fc.array(
              fc.record({ id: fc.constantFrom('a', 'b', 'c', 'd'), cost: fc.integer({ min: 0, max: 2 }) }),
              { minLength: 1, maxLength: 6 },
            ),
          }),
          { minLength: 1, maxLength: 25 },
        ),
        async (steps) => {
          let nowMs = START_MS;
          const rl = new RateLimiter({
            redis,
            keyPrefix: randomPrefix(),
            policies: [{ name: 'recipient', capacity, ratePerSecond: rate }],
            hashTag: 'model',
            denyCache: false,
            clock: () => nowMs,
          });
          const states = new Map<string, ExactBucket>();
          for (const step of steps) {
            nowMs += step.dtMs;
            const now = Math.round(nowMs * 1000);
            const merged = new Map<string, number>();
            for (const { id, cost } of step.batch) merged.set(id, (merged.get(id) ?? 0) + cost);
            const ids = step.batch.map((item) => item.id);
            const costs = step.batch.map((item) => item.cost);
            if ([...merged.values()].some((cost) => cost > capacity)) {
              await expect(rl.consume({ recipient: ids }, { recipient: costs })).rejects.toBeInstanceOf(
                CostExceedsCapacityError,
              );
              continue;
            }
            const alone = [...merged].map(([id, cost]) => ({
              id,
              step: exactStep(states.get(id), now, capacity, exactRate('token-bucket', rate), cost),
            }));
            const allowed = alone.every((a) => a.step.answer.allowed);
            const result = await rl.consume({ recipient: ids }, { recipient: costs });
            expect(result.allowed).toBe(allowed);
            if (allowed) {
              for (const a of alone) if (a.step.state) states.set(a.id, a.step.state);
              const fewest = Math.min(...alone.map((a) => a.step.answer.remaining));
              expect(result.remaining).toBe(fewest);
            } else {
              const longest = Math.max(...alone.map((a) => a.step.answer.retryAfterMs));
              expect(result.retryAfterMs).toBe(longest);
              const denier = alone.find((a) => a.step.answer.retryAfterMs === longest)!;
              expect(result.deniedId).toBe(denier.id);
            }
          }
        },
      ),
      { numRuns: 40 },
    );
  });
});
