import { describe, expect, it } from 'vitest';
import { type Algorithm, RateLimiter } from '../src/index.js';
import { START_MS } from './support/clock.js';
import { connectRedisForFile, onCluster, randomPrefix } from './support/redis.js';

// Whole numbers stay whole: `remaining`, `retryAfterMs` and `resetAfterMs` are exact where the exact
// answer is an integer, for every capacity and rate (review finding 9: a fresh GCRA bucket of capacity 7
// at 3/s reported 6 for a cost of 0, because 7 · (1e6/3) / (1e6/3) = 6.999999999999999 in doubles).

const redis = await connectRedisForFile();
const ALGORITHMS: Algorithm[] = ['token-bucket', 'gcra'];
/** The one-key script (a one-id call), the N-key script (two ids) and, on one node, the batch script. */
const SHAPES = ['one key', 'n keys', 'batch'] as const;

function limiter(algorithm: Algorithm, capacity: number, ratePerSecond: number, clock: () => number) {
  return new RateLimiter({
    redis,
    algorithm,
    keyPrefix: randomPrefix(),
    policies: [{ name: 'p', capacity, ratePerSecond }],
    hashTag: 'exact',
    denyCache: false,
    clock,
  });
}

/** `remaining` of one bucket after a call of `cost`, through the script of `shape`. */
async function remainingAfter(rl: RateLimiter, shape: (typeof SHAPES)[number], id: string, cost: number) {
  if (shape === 'one key') return (await rl.consume(id, cost)).remaining;
  if (shape === 'n keys') {
    const result = await rl.consume({ p: [id, `${id}-other`] }, { p: [cost, 0] });
    return result.policies[0]!.id === id ? result.policies[0]!.remaining : Number.NaN;
  }
  // Two calls in one turn: one batch script call on a single node.
  const [result] = await Promise.all([rl.consume(id, cost), rl.consume(`${id}-other`, 0)]);
  return result.remaining;
}

describe.each(ALGORITHMS)('%s: exact remaining', (algorithm) => {
  it.each(SHAPES)('a fresh bucket of capacity 7 at 3/s reports 7 − cost (%s)', async (shape) => {
    if (shape === 'batch' && onCluster()) return;
    const rl = limiter(algorithm, 7, 3, () => START_MS);
    for (let cost = 0; cost <= 7; cost++) {
      expect(await remainingAfter(rl, shape, `fresh-${cost}`, cost), `cost ${cost}`).toBe(7 - cost);
    }
  });

  it.each(SHAPES)('a bucket refilled for exactly one unit reports one more (%s)', async (shape) => {
    if (shape === 'batch' && onCluster()) return;
    for (const [capacity, rate] of [
      [7, 3],
      [10, 7],
      [5, 0.1],
      [100, 30],
    ] as const) {
      let now = START_MS;
      const rl = limiter(algorithm, capacity, rate, () => now);
      expect(await remainingAfter(rl, shape, 'u', capacity)).toBe(0);
      // 1 / rate seconds, in whole µs, rounded up: the unit is back.
      now += Math.ceil(1e6 / rate) / 1000;
      const peek = await rl.peek('u');
      expect(peek.remaining, `capacity ${capacity} at ${rate}/s`).toBe(1);
    }
  });
});
