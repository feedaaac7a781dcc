import { randomId, testRedis } from '@herald/testing';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkTopic, InboxError, InboxErrorCode, Topics } from '../src/index.js';

describe('topics', () => {
  let redis: Redis | Cluster;
  beforeAll(() => {
    redis = testRedis();
  });
  afterAll(() => redis.disconnect());

  const setup = () => new Topics(redis, { prefix: `${randomId('inbox')}:` });

  it('pages a topic by user id: members that stay are seen once, whatever is added or removed meanwhile', async () => {
    const topics = setup().tenant('acme');
    const stay = Array.from({ length: 30 }, (_, i) => `u${String(i).padStart(2, '0')}`);
    await topics.subscribe('t', stay);
    const seen: string[] = [];
    let after: string | undefined;
    for (let turn = 0; ; turn++) {
      const page = await topics.page({ topic: 't' }, after, 7);
      seen.push(...page.userIds);
      // Between pages: newcomers before and after the cursor, and a member that leaves.
      await topics.subscribe('t', [`a-${turn}`, `z-${turn}`]);
      await topics.unsubscribe('t', [`a-${turn - 1}`]);
      if (page.nextAfter === null) break;
      after = page.nextAfter;
    }
    expect(seen.filter((id) => id.startsWith('u'))).toEqual(stay);
    expect(new Set(seen).size).toBe(seen.length);
  });

  it('keeps tenants and topics apart, and counts subscribers and the tenant’s users', async () => {
    const root = setup();
    const acme = root.tenant('acme');
    const globex = root.tenant('globex');
    expect(await acme.subscribe('news', ['alice', 'bob'])).toEqual({ changed: 2, subscribers: 2 });
    expect(await acme.subscribe('news', ['bob'])).toEqual({ changed: 0, subscribers: 2 });
    await acme.subscribe('other', ['carol']);
    await acme.remember(['dave']);
    expect(await globex.size({ topic: 'news' })).toBe(0);
    expect(await acme.size({ broadcast: true })).toBe(4);
    expect(acme.subscribersKey('news')).not.toBe(globex.subscribersKey('news'));
    expect(acme.subscribersKey('news')).toMatch(/\{news\}$/);
    expect(await acme.unsubscribe('news', ['alice', 'zed'])).toEqual({ changed: 1, subscribers: 1 });
    // Unsubscribed users stay users of the tenant (a broadcast still reaches them).
    expect(await acme.size({ broadcast: true })).toBe(4);
  });

  it('adds a user to the tenant’s users once per process and while: a repeat costs Redis nothing', async () => {
    const root = setup();
    const acme = root.tenant('acme');
    await acme.remember(['dave', 'erin']);
    expect(await redis.zrange(acme.usersKey(), 0, -1)).toEqual(['dave', 'erin']);
    // Taken out behind its back: this process trusts its memory (for up to 10 minutes) and sends
    // nothing for dave, even through another tenant view of the same root; erin's new neighbour is sent.
    await redis.zrem(acme.usersKey(), 'dave');
    await root.tenant('acme').remember(['dave', 'fay']);
    expect(await redis.zrange(acme.usersKey(), 0, -1)).toEqual(['erin', 'fay']);
    // Another tenant's dave is another user; another process (a new root) sends it again.
    await root.tenant('globex').remember(['dave']);
    expect(await root.tenant('globex').size({ broadcast: true })).toBe(1);
    await new Topics(redis, { prefix: root.prefix }).tenant('acme').remember(['dave']);
    expect(await redis.zrange(acme.usersKey(), 0, -1)).toEqual(['dave', 'erin', 'fay']);
  });

  it('records a fan-out once and its checkpoints', async () => {
    const root = setup();
    const topics = root.tenant('acme');
    await topics.subscribe('t', ['a', 'b', 'c']);
    const first = await topics.startFanout('f1', { topic: 't' }, 60_000);
    expect(first).toMatchObject({ state: 'fanning-out', total: 3, reached: 0, audience: { topic: 't' } });
    await topics.checkpoint(
      'f1',
      { total: 3, reached: 2, expired: 0, deduplicated: 0, muted: 0, failed: 0, cursor: 'b' },
      undefined,
    );
    await topics.subscribe('t', ['d']);
    // A resumed fan-out starts from the checkpoint, with the total it started with.
    expect(await topics.startFanout('f1', { topic: 't' }, 60_000)).toMatchObject({
      cursor: 'b',
      reached: 2,
      total: 3,
    });
    await topics.checkpoint(
      'f1',
      { total: 4, reached: 3, expired: 0, deduplicated: 0, muted: 0, failed: 1, cursor: 'd' },
      { atMs: 1000 },
      // With why each recipient the chunk could not store failed (cut to 500 characters).
      new Map([['c', `WRONGTYPE ${'x'.repeat(600)}`]]),
    );
    expect(await topics.fanout('f1')).toMatchObject({ state: 'sent', total: 4, failed: 1, sentAtMs: 1000 });
    expect((await topics.fanout('f1'))?.failures).toEqual(new Map([['c', `WRONGTYPE ${'x'.repeat(490)}`]]));
    expect(await root.tenant('globex').fanout('f1')).toBeUndefined();
  });

  it('refuses a topic name outside 1-64 of A-Z a-z 0-9 _ . : / -', () => {
    expect(checkTopic('orders/eu:v1')).toBe('orders/eu:v1');
    for (const bad of ['', 'a b', '{x}', 't'.repeat(65), 'é'])
      expect(() => checkTopic(bad)).toThrow(InboxError);
  });

  it('refuses a value that is no string at all with an InboxError naming its type, whatever its nesting', () => {
    // A socket client's `mute { topics: [[[…]]] }`: building the message must not stringify what it was
    // sent (20,000 nested arrays overflowed the stack there, and the client got "Redis unavailable").
    let deep: unknown = [];
    for (let i = 0; i < 20_000; i++) deep = [deep];
    for (const [bad, shown] of [
      [deep, 'an array'],
      [{ toString: () => 'x' }, 'an object'],
      [5, 'a number'],
      [null, 'null'],
    ] as const) {
      expect(() => checkTopic(bad as unknown as string)).toThrow(
        new InboxError(
          InboxErrorCode.INVALID_ARGUMENT,
          `${shown} is not a topic name: 1 to 64 of A-Z a-z 0-9 _ . : / -, not . or .. alone or between slashes`,
        ),
      );
    }
    for (const segment of ['.', '..', 'a/..', './b', 'a/./b'])
      expect(() => checkTopic(segment), segment).toThrow(/is not a topic name/);
    expect(checkTopic('a..b/.c')).toBe('a..b/.c');
    // A long string is cut in the message.
    expect(() => checkTopic('x'.repeat(5000))).toThrow(/^"x{64}…" is not a topic name/);
  });
});
