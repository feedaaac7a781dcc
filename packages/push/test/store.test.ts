import { createECDH, randomBytes } from 'node:crypto';
import type { PushSubscriptionJSON } from '@herald/protocol';
import { randomId, testRedis } from '@herald/testing';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PUSH_SUBSCRIPTION_TTL_MS, PushSubscriptions, pushSubscriptionKeys } from '../src/index.js';

function subscription(n: number): PushSubscriptionJSON {
  const ecdh = createECDH('prime256v1');
  ecdh.generateKeys();
  return {
    endpoint: `https://push.example.com/send/${n}`,
    expirationTime: null,
    keys: { p256dh: ecdh.getPublicKey('base64url'), auth: randomBytes(16).toString('base64url') },
  };
}

let redis: Redis | Cluster;
let prefix: string;
beforeAll(() => {
  redis = testRedis();
});
afterAll(() => redis.disconnect());

describe('PushSubscriptions', () => {
  it('the endpoint registered last is the newest, however fast registrations follow each other', async () => {
    prefix = `test:${randomId()}:`;
    const store = new PushSubscriptions(redis, prefix);
    const [a, b] = [subscription(1), subscription(2)];
    await store.add('acme', 'alice', a);
    await store.add('acme', 'alice', b);
    // Back to back: many fall in the same millisecond (a clock's score tied them, and Redis then
    // ordered them by endpoint).
    for (let i = 0; i < 40; i++) {
      const renewed = i % 2 === 0 ? a : b;
      await store.add('acme', 'alice', renewed);
      expect((await store.list('acme', 'alice')).at(-1)?.endpoint).toBe(renewed.endpoint);
    }
  });

  it('keeps a user’s subscriptions by endpoint, oldest first; the same endpoint again is updated, not added', async () => {
    prefix = `test:${randomId()}:`;
    const store = new PushSubscriptions(redis, prefix);
    const [a, b] = [subscription(1), subscription(2)];
    expect(await store.add('acme', 'alice', a)).toEqual({ count: 1, replaced: 0 });
    expect(await store.add('acme', 'alice', b)).toEqual({ count: 2, replaced: 0 });
    const renewed = { ...a, keys: subscription(1).keys };
    expect(await store.add('acme', 'alice', renewed)).toEqual({ count: 2, replaced: 0 });
    expect(await store.list('acme', 'alice')).toEqual([b, renewed]);
    const keys = pushSubscriptionKeys(prefix, 'acme', 'alice');
    expect(keys.subscriptions).toBe(`${prefix}t:acme:{alice}:push:subs`);
    const ttl = await redis.pttl(keys.subscriptions);
    expect(ttl).toBeGreaterThan(PUSH_SUBSCRIPTION_TTL_MS - 60_000);
    expect(await redis.pttl(keys.order)).toBeGreaterThan(PUSH_SUBSCRIPTION_TTL_MS - 60_000);
  });

  it('is bounded per user: one more replaces the oldest', async () => {
    prefix = `test:${randomId()}:`;
    const store = new PushSubscriptions(redis, prefix, { maxPerUser: 3 });
    const all = [1, 2, 3, 4, 5].map(subscription);
    const answers = [];
    for (const one of all) answers.push(await store.add('acme', 'bob', one));
    expect(answers.map((answer) => answer.replaced)).toEqual([0, 0, 0, 1, 1]);
    expect(answers.at(-1)?.count).toBe(3);
    expect(await store.list('acme', 'bob')).toEqual(all.slice(2));
  });

  it('keeps tenants and users apart; remove takes one endpoint of one user', async () => {
    prefix = `test:${randomId()}:`;
    const store = new PushSubscriptions(redis, prefix);
    const shared = subscription(7);
    await store.add('acme', 'alice', shared);
    await store.add('other', 'alice', subscription(8));
    await store.add('default', 'alice', subscription(9));
    expect(await store.list('acme', 'mallory')).toEqual([]);
    expect(await store.list('other', 'alice')).toHaveLength(1);
    // Another tenant's alice removing acme's endpoint changes nothing of acme's.
    expect(await store.remove('other', 'alice', shared.endpoint)).toBe(1);
    expect(await store.list('acme', 'alice')).toEqual([shared]);
    expect(await store.remove('acme', 'alice', shared.endpoint)).toBe(0);
    expect(await store.list('acme', 'alice')).toEqual([]);
    expect(await store.list('default', 'alice')).toHaveLength(1);
  });
});
