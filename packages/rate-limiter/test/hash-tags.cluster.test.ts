import calculateSlot from 'cluster-key-slot';
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

  it('batches the calls of one turn per hash slot, each call all or nothing, in call order', async () => {
    const cluster = redis as Cluster;
    const tagged = new RateLimiter({ redis, keyPrefix: randomPrefix(), policies, hashTag: 'tenant-a' });
    const perKey = new RateLimiter({
      redis,
      keyPrefix: randomPrefix(),
      policies,
      hashTag: (ids) => ids.apiKey ?? '',
    });
    // Loads the scripts on every master first (a first EVALSHA there answers NOSCRIPT, then EVAL).
    for (const rl of [tagged, perKey]) {
      for (const apiKey of ['warm-A', 'warm-B', 'key-A', 'key-B']) {
        await rl.consume({ apiKey, recipient: 'warm' }, { apiKey: 0, recipient: 0 });
        await Promise.all([
          rl.consume({ apiKey, recipient: 'warm' }, { apiKey: 0, recipient: 0 }),
          rl.consume({ apiKey, recipient: 'warm' }, { apiKey: 0, recipient: 0 }),
        ]);
      }
    }
    const sent: string[] = [];
    const send = cluster.sendCommand;
    cluster.sendCommand = function (this: Cluster, command, ...rest) {
      sent.push(command.name);
      return send.call(this, command, ...rest);
    } as typeof send;
    try {
      // One tag: every call of the turn in one script call. The API key has 3 tokens, each recipient 1.
      const one = await Promise.all(
        Array.from({ length: 10 }, (_, i) => tagged.consume({ apiKey: 'key-A', recipient: `user-${i % 5}` })),
      );
      expect(sent).toEqual(['evalsha']);
      expect(one.map((r) => r.allowed)).toEqual([true, true, true, ...Array(7).fill(false)]);
      expect(one.slice(3).map((r) => r.policy)).toEqual(Array(7).fill('apiKey'));
      expect(one.every((r) => r.source === 'redis')).toBe(true);
      // A tag per API key (two slots here): one script call per slot, each slot's calls in order.
      expect(calculateSlot('key-A')).not.toBe(calculateSlot('key-B'));
      sent.length = 0;
      const two = await Promise.all(
        ['key-A', 'key-B', 'key-A', 'key-B', 'key-A'].map((apiKey, i) =>
          perKey.consume({ apiKey, recipient: `user-${i}` }),
        ),
      );
      expect(sent).toEqual(['evalsha', 'evalsha']);
      expect(two.map((r) => r.policies[0]?.remaining)).toEqual([2, 2, 1, 1, 0]);
    } finally {
      cluster.sendCommand = send;
    }
  });
});
