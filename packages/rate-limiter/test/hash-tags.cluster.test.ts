import type { Cluster } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { RateLimiter, RateLimiterErrorCode } from '../src/index.js';
import { connectRedisForFile, randomPrefix } from './support/redis.js';

// Cluster only: how the keys of a multi-policy call are kept in one slot (see README, "Redis Cluster").

const redis = await connectRedisForFile();

const policies = [
  { name: 'apiKey', capacity: 3, ratePerSecond: 0.001 },
  { name: 'recipient', capacity: 1, ratePerSecond: 0.001 },
];

async function slotOf(key: string): Promise<number> {
  return (await redis.call('CLUSTER', 'KEYSLOT', key)) as number;
}

describe('hash tags on Redis Cluster', () => {
  it('runs against a cluster of 3 masters', async () => {
    const masters = (redis as Cluster).nodes('master');
    expect(masters.length).toBe(3);
  });

  it('refuses different ids in one call without a hashTag, before touching Redis', async () => {
    const rl = new RateLimiter({ redis, keyPrefix: randomPrefix(), policies });
    await expect(rl.consume({ apiKey: 'k', recipient: 'u' })).rejects.toMatchObject({
      code: RateLimiterErrorCode.CROSS_SLOT,
    });
    // One id for every policy needs no hashTag: every key is tagged by that id.
    expect((await rl.consume('same')).allowed).toBe(true);
  });

  it('a fixed group tag keeps every key of the limiter in one slot; recipients stay global', async () => {
    const rl = new RateLimiter({ redis, keyPrefix: randomPrefix(), policies, hashTag: 'herald-notify' });
    expect((await rl.consume({ apiKey: 'key-A', recipient: 'user-1' })).allowed).toBe(true);
    // The recipient's bucket is shared by every API key: key-B is denied on user-1.
    const denied = await rl.consume({ apiKey: 'key-B', recipient: 'user-1' });
    expect(denied).toMatchObject({ allowed: false, policy: 'recipient' });
    const slots = new Set(
      await Promise.all(
        ['key-A', 'key-B']
          .map((id) => slotOf(rl.keyOf('apiKey', id, 'herald-notify')))
          .concat(slotOf(rl.keyOf('recipient', 'user-1', 'herald-notify'))),
      ),
    );
    expect(slots.size).toBe(1);
  });

  it('a tag per API key spreads tenants over slots; the recipient bucket is then per (API key, recipient)', async () => {
    const rl = new RateLimiter({
      redis,
      keyPrefix: randomPrefix(),
      policies,
      hashTag: (ids) => ids.apiKey ?? '',
    });
    expect((await rl.consume({ apiKey: 'key-A', recipient: 'user-1' })).allowed).toBe(true);
    // A different API key has its own recipient bucket for user-1: the trade-off of this tag.
    expect((await rl.consume({ apiKey: 'key-B', recipient: 'user-1' })).allowed).toBe(true);
    const slotsOfA = new Set([
      await slotOf(rl.keyOf('apiKey', 'key-A', 'key-A')),
      await slotOf(rl.keyOf('recipient', 'user-1', 'key-A')),
    ]);
    expect(slotsOfA.size).toBe(1);
    // Over many tenants, keys land on more than one slot.
    const many = new Set(
      await Promise.all(
        Array.from({ length: 20 }, (_, i) => slotOf(rl.keyOf('apiKey', `key-${i}`, `key-${i}`))),
      ),
    );
    expect(many.size).toBeGreaterThan(1);
  });
});
