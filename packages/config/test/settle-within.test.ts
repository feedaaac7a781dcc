import { type RedisServerHandle, startRedisServer } from '@herald/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { settleWithin } from '../src/settle-within.js';

describe('settleWithin on a busy event loop', () => {
  let server: RedisServerHandle;
  let redis: Redis;
  beforeAll(async () => {
    server = await startRedisServer();
    redis = new Redis(server.url);
  });
  afterAll(async () => {
    redis?.disconnect();
    await server?.dispose();
  });

  it('an answer that came in time is the answer, though the timer is due when the loop gets to it (before: the late value)', async () => {
    await redis.ping();
    const answer = settleWithin(redis.ping(), 100, 'late');
    await new Promise((resolve) => setImmediate(resolve));
    // The process busy for 300 ms: Redis answers meanwhile, its reply waits in the socket.
    const until = Date.now() + 300;
    while (Date.now() < until) {
      // busy
    }
    expect(await answer).toBe('PONG');
    // A real wait still ends at `late`.
    expect(await settleWithin(new Promise(() => {}), 50, 'late')).toBe('late');
  });
});
