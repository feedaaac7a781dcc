import { type RedisServerHandle, startRedisServer, waitFor } from '@herald/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisClock } from '../src/redis-clock.js';

/** Redis's clock now, ms. */
async function redisNow(redis: Redis): Promise<number> {
  const [seconds, micros] = await redis.time();
  return Number(seconds) * 1000 + Number(micros) / 1000;
}

/**
 * A first reading taken behind a `DEBUG SLEEP` of `ms` on the clock's own connection: Redis reads its
 * clock at the end of the round trip, which the clock takes for the middle, so it runs ms / 2 ahead
 * until a quick reading sets it right, a step back.
 */
async function aheadBy(redis: Redis, ms: number): Promise<RedisClock> {
  const clock = new RedisClock(redis);
  const sleeping = redis.call('DEBUG', 'SLEEP', String(ms / 1000));
  // Sent after the DEBUG SLEEP on the same connection: Redis answers it when the sleep is over.
  void clock.sync();
  await sleeping;
  await waitFor(async () => clock.now() - (await redisNow(redis)) > ms / 4, {
    what: `the clock's first reading, taken ${ms} ms late`,
  });
  return clock;
}

describe('RedisClock: Redis’s clock as this process tells it', () => {
  let server: RedisServerHandle;
  let redis: Redis;

  beforeAll(async () => {
    server = await startRedisServer({ args: ['--enable-debug-command', 'local'] });
    redis = new Redis(server.url);
    await redis.ping();
  }, 60_000);
  afterAll(async () => {
    redis?.disconnect();
    await server?.dispose();
  });

  it('never answers less than before when a new reading is a little behind (what it stamps keeps its order)', async () => {
    const clock = await aheadBy(redis, 400);
    const stamps = [clock.now()];
    expect(await clock.sync()).toBe(true);
    stamps.push(clock.now());
    await waitFor(
      () => {
        stamps.push(clock.now());
        return stamps.at(-1) !== stamps.at(-2);
      },
      { what: 'the clock to move on', timeoutMs: 5000, intervalMs: 5 },
    );
    for (let i = 1; i < stamps.length; i++) expect(stamps[i]).toBeGreaterThanOrEqual(stamps[i - 1] ?? 0);
    // Then it is Redis's clock again (within a loopback round trip and the test's polling).
    expect(Math.abs(clock.now() - (await redisNow(redis)))).toBeLessThan(50);
  }, 30_000);

  it('follows a step back of more than a second at once: Redis’s clock is the one', async () => {
    const clock = await aheadBy(redis, 3000);
    const before = clock.now();
    expect(await clock.sync()).toBe(true);
    expect(clock.now()).toBeLessThan(before - 1000);
    expect(Math.abs(clock.now() - (await redisNow(redis)))).toBeLessThan(50);
  }, 30_000);
});
