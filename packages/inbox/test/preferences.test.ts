import { randomId, testRedis } from '@herald/testing';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  Inbox,
  InboxError,
  InboxErrorCode,
  type InboxNotification,
  offsetSeq,
  Preferences,
} from '../src/index.js';

describe('preferences: mutes, checked inside the append script', () => {
  let redis: Redis | Cluster;
  beforeAll(() => {
    redis = testRedis();
  });
  afterAll(() => redis.disconnect());

  function setup() {
    const prefix = `${randomId('inbox')}:`;
    return {
      inbox: new Inbox(redis, { prefix }).tenant('acme'),
      preferences: new Preferences(redis, { prefix }).tenant('acme'),
      user: randomId('u'),
    };
  }
  function notification(
    userId: string,
    n: number,
    labels: { topic?: string; type?: string } = {},
  ): InboxNotification {
    return { id: `n-${n}`, userId, payload: { n }, createdAt: new Date().toISOString(), ...labels };
  }

  it('stores nothing of a muted topic or type, stores the rest with gapless offsets, and counts only what is stored', async () => {
    const { inbox, preferences, user } = setup();
    expect(await preferences.mute(user, { topics: ['marketing'], types: ['digest'] })).toEqual({
      changed: 2,
      muted: { topics: ['marketing'], types: ['digest'] },
    });
    const outcomes = [];
    outcomes.push(await inbox.append(notification(user, 1, { topic: 'orders' })));
    outcomes.push(await inbox.append(notification(user, 2, { topic: 'marketing' })));
    outcomes.push(await inbox.append(notification(user, 3, { type: 'digest' })));
    outcomes.push(await inbox.append(notification(user, 4, { topic: 'orders', type: 'digest' })));
    outcomes.push(await inbox.append(notification(user, 5)));
    // A type named like a muted topic is another mute (and the other way round).
    outcomes.push(await inbox.append(notification(user, 6, { type: 'marketing', topic: 'digest' })));
    expect(outcomes.map((r) => r.outcome)).toEqual([
      'appended',
      'muted',
      'muted',
      'muted',
      'appended',
      'appended',
    ]);
    expect(outcomes[1]).toMatchObject({ mutedBy: { topic: 'marketing' } });
    expect(outcomes[2]).toMatchObject({ mutedBy: { type: 'digest' } });
    const page = await inbox.read(user);
    expect(page.entries.map((e) => e.id)).toEqual(['n-1', 'n-5', 'n-6']);
    // Gapless: a reader after n-1 sees n-5 right after it, never a trimmed gap.
    expect(page.entries.map((e) => offsetSeq(e.offset))).toEqual([1, 2, 3]);
    expect((await inbox.read(user, { after: page.entries[0]?.offset })).trimmed).toBe(false);
    expect((await inbox.unread(user)).count).toBe(3);
    expect(await inbox.status(user, 'n-2')).toMatchObject({
      state: 'muted',
      offset: null,
      muted: { topic: 'marketing' },
      tenantId: 'acme',
    });
    expect(await inbox.status(user, 'n-3')).toMatchObject({ state: 'muted', muted: { type: 'digest' } });
  });

  it('keeps a retried notification as its first pass left it: muted stays muted after an unmute, stored stays stored after a mute', async () => {
    const { inbox, preferences, user } = setup();
    await preferences.mute(user, { topics: ['news'] });
    expect((await inbox.append(notification(user, 1, { topic: 'news' }))).outcome).toBe('muted');
    expect(await preferences.unmute(user, { topics: ['news'] })).toEqual({
      changed: 1,
      muted: { topics: [], types: [] },
    });
    // The same job run again (stalled, retried): still muted, still not stored.
    expect(await inbox.append(notification(user, 1, { topic: 'news' }))).toMatchObject({
      outcome: 'muted',
      mutedBy: { topic: 'news' },
    });
    // A new notification of the unmuted topic is stored.
    const stored = await inbox.append(notification(user, 2, { topic: 'news' }));
    expect(stored.outcome).toBe('appended');
    await preferences.mute(user, { topics: ['news'] });
    expect(await inbox.append(notification(user, 2, { topic: 'news' }))).toMatchObject({
      outcome: 'already-appended',
      offset: (stored as { offset: string }).offset,
    });
    expect((await inbox.read(user)).entries.map((e) => e.id)).toEqual(['n-2']);
  });

  it('lets a muted notification not hold its dedupe key', async () => {
    const { inbox, preferences, user } = setup();
    await preferences.mute(user, { types: ['ping'] });
    expect((await inbox.append(notification(user, 1, { type: 'ping' }), { dedupeKey: 'k' })).outcome).toBe(
      'muted',
    );
    expect((await inbox.append(notification(user, 2), { dedupeKey: 'k' })).outcome).toBe('appended');
  });

  it('keeps users and tenants apart, and the mutes key in the user’s inbox slot', async () => {
    const { inbox, preferences, user } = setup();
    await preferences.mute(user, { topics: ['t'] });
    expect(await preferences.get(randomId('other'))).toEqual({ topics: [], types: [] });
    expect(await preferences.tenant('globex').get(user)).toEqual({ topics: [], types: [] });
    expect((await inbox.tenant('globex').append(notification(user, 1, { topic: 't' }))).outcome).toBe(
      'appended',
    );
    const keys = inbox.keys(user);
    const tag = (key: string) => key.slice(key.indexOf('{') + 1, key.indexOf('}'));
    expect(tag(keys.mutes)).toBe(tag(keys.stream));
  });

  it('bounds the mutes per user at 1,000, all or none, and refuses names that are no topic or type', async () => {
    const { preferences, user } = setup();
    const names = (from: number, count: number) => Array.from({ length: count }, (_, i) => `t${from + i}`);
    expect((await preferences.mute(user, { topics: names(0, 600) })).changed).toBe(600);
    // Muting again what is muted costs nothing: 600 + 399 new fits.
    expect((await preferences.mute(user, { topics: names(0, 999) })).changed).toBe(399);
    const over = await preferences.mute(user, { topics: ['a'], types: ['b'] }).catch((e: unknown) => e);
    expect(over).toBeInstanceOf(InboxError);
    expect((over as InboxError).code).toBe(InboxErrorCode.TOO_MANY_MUTES);
    const after = await preferences.get(user);
    expect(after.topics).toHaveLength(999);
    expect(after.types).toEqual([]);
    expect((await preferences.mute(user, { types: ['b'] })).changed).toBe(1);
    for (const bad of [
      {},
      { topics: [] },
      { topics: ['a b'] },
      { types: ['{x}'] },
      { topics: ['t'.repeat(65)] },
    ]) {
      const error = await preferences.mute(user, bad).catch((e: unknown) => e);
      expect((error as InboxError).code).toBe(InboxErrorCode.INVALID_ARGUMENT);
    }
  });
});
