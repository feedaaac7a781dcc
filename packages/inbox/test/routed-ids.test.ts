import { randomUUID } from 'node:crypto';
import { randomId, testRedis } from '@herald/testing';
import calculateSlot from 'cluster-key-slot';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  Inbox,
  inboxKeys,
  notificationIdFor,
  notificationIndexKey,
  routedMarkerKey,
  routedSlot,
  slotTag,
  unroutedId,
} from '../src/index.js';

/** A user id other than `userId` whose inbox is in the same Redis Cluster slot. */
function neighbourOf(userId: string): string {
  const slot = calculateSlot(`{${userId}}`);
  for (let i = 0; ; i++) {
    const other = `${userId}-n${i}`;
    if (calculateSlot(`{${other}}`) === slot) return other;
  }
}

describe('routed notification ids', () => {
  it('name the slot of their user’s inbox, and the marker of one is in that slot, found from the id alone', () => {
    const users = [
      'alice',
      'a{b}',
      'x/y:z',
      '%',
      'b@example.com',
      ...Array.from({ length: 200 }, () => randomId('u')),
    ];
    for (const user of users) {
      const id = notificationIdFor(user);
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      const keys = inboxKeys('herald:inbox:', user);
      const slot = calculateSlot(keys.stream);
      expect(routedSlot(id)).toBe(slot);
      expect(keys.routes(id)).toBe(true);
      expect(calculateSlot(keys.marker(id))).toBe(slot);
      expect(keys.marker(id)).toBe(routedMarkerKey('herald:inbox:', id));
      // Any other user's marker of it is their own, as for every id that is not routed to them.
      const other = inboxKeys('herald:inbox:', `${user}-other`);
      if (calculateSlot(other.stream) !== slot)
        expect(other.marker(id)).toBe(
          `herald:inbox:{${user.replace(/[%{}]/g, (c) => encodeURIComponent(c))}-other}:n:${id}`,
        );
    }
    // Ids that are not routed: random and derived UUIDs written before, any other string.
    for (let i = 0; i < 2000; i++) expect(routedSlot(randomUUID())).toBeUndefined();
    const routed = notificationIdFor('alice');
    const tampered = `${routed.slice(0, 35)}${routed.at(-1) === '0' ? '1' : '0'}`;
    expect(routedSlot(tampered)).toBeUndefined();
    expect(routedSlot(routed.toUpperCase())).toBeUndefined();
    expect(routedSlot('n-1')).toBeUndefined();
    expect(inboxKeys('herald:inbox:', 'alice').marker(tampered)).toBe(`herald:inbox:{alice}:n:${tampered}`);
    expect(routedMarkerKey('herald:inbox:', 'n-1')).toBeUndefined();
  });

  it('derive from a seed the same id every time, and one id never routed stays so', () => {
    const seed = 'c0ffee'.repeat(11);
    expect(notificationIdFor('alice', seed)).toBe(notificationIdFor('alice', seed));
    expect(notificationIdFor('alice', seed)).not.toBe(notificationIdFor('bob', seed));
    expect(new Set(Array.from({ length: 1000 }, () => notificationIdFor('alice'))).size).toBe(1000);
    const routed = notificationIdFor('alice');
    expect(routedSlot(unroutedId(routed))).toBeUndefined();
    const plain = randomUUID();
    expect(unroutedId(plain)).toBe(plain);
  });

  it('slot tags: one per slot, in that slot, by a rule that never changes (keys written by it are found by it)', () => {
    for (let slot = 0; slot < 16_384; slot++) expect(calculateSlot(slotTag(slot))).toBe(slot);
    // The first base-36 numbers in their slots, pinned: a different rule would lose every routed marker.
    expect([slotTag(calculateSlot('0')), slotTag(calculateSlot('1')), slotTag(calculateSlot('z'))]).toEqual([
      '0',
      '1',
      'z',
    ]);
    expect(
      Math.max(...Array.from({ length: 16_384 }, (_, slot) => slotTag(slot).length)),
    ).toBeLessThanOrEqual(4);
  });

  describe('in Redis', () => {
    let redis: Redis | Cluster;
    beforeAll(() => {
      redis = testRedis();
    });
    afterAll(() => redis.disconnect());

    function setup() {
      const inbox = new Inbox(redis, { prefix: `${randomId('inbox')}:` });
      const user = randomId('u');
      return { inbox, user };
    }
    const sent = (id: string, userId: string) => ({
      id,
      userId,
      payload: { id },
      createdAt: new Date().toISOString(),
    });

    it('a routed id is stored with no id index, and found by id alone: status, locate, once on a retry', async () => {
      const { inbox: root, user } = setup();
      const inbox = root.tenant('acme');
      const id = notificationIdFor(user);
      const first = await inbox.append(sent(id, user));
      expect(first.outcome).toBe('appended');
      expect(await redis.exists(notificationIndexKey(`${root.prefix}t:acme:`, id))).toBe(0);
      expect(await redis.hget(inbox.keys(user).marker(id), 'user')).toBe(user);
      expect(await inbox.locate(id)).toBe(user);
      expect(await inbox.statusById(id)).toMatchObject({
        id,
        userId: user,
        state: 'inbox',
        tenantId: 'acme',
      });
      // A retry (a stalled job) answers the first append, stores nothing more.
      const again = await inbox.append(sent(id, user));
      expect(again).toMatchObject({
        outcome: 'already-appended',
        offset: first.outcome === 'appended' ? first.offset : '',
      });
      expect((await inbox.read(user)).entries.map((entry) => entry.id)).toEqual([id]);
      // Its retention is the marker's, as the index's was.
      const ttl = await redis.pttl(inbox.keys(user).marker(id));
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(root.retentionMs);
      // Other tenants do not see it.
      expect(await root.statusById(id)).toBeUndefined();
      expect(await root.tenant('globex').locate(id)).toBeUndefined();
    });

    it('a user of the same slot cannot read, ack or own another’s routed notification', async () => {
      const { inbox, user } = setup();
      const neighbour = neighbourOf(user);
      const id = notificationIdFor(user);
      await inbox.append(sent(id, user));
      // Their marker key is the owner's (same slot, same id): the owner field decides.
      expect(inbox.keys(neighbour).marker(id)).toBe(inbox.keys(user).marker(id));
      expect(await inbox.status(neighbour, id)).toBeUndefined();
      expect((await inbox.acknowledge(neighbour, [id], 'rt-x')).ids).toEqual([]);
      expect(await inbox.status(user, id)).toMatchObject({ delivered: false });
      expect((await inbox.acknowledge(user, [id], 'rt-a')).ids).toEqual([id]);
      expect(await inbox.status(user, id)).toMatchObject({ delivered: true, deliveredBy: 'rt-a' });
    });

    it('a routed id cancelled before it is stored: no index, found by id, and the append stores nothing', async () => {
      const { inbox, user } = setup();
      const id = notificationIdFor(user);
      expect(await inbox.cancel(user, id)).toMatchObject({ state: 'cancelled' });
      expect(await redis.exists(notificationIndexKey(inbox.prefix, id))).toBe(0);
      expect(await inbox.statusById(id)).toMatchObject({ userId: user, state: 'cancelled' });
      expect((await inbox.append(sent(id, user))).outcome).toBe('cancelled');
      expect((await inbox.read(user)).entries).toEqual([]);
    });

    it('a routed id stored by a worker from before routed ids (a rolling upgrade: its marker under the user’s keys, an id index) is found by status, ack, listing, cancel, and a re-run stores it once', async () => {
      const { inbox: root, user } = setup();
      const inbox = root.tenant('acme');
      const keys = inbox.keys(user);
      const base = `${root.prefix}t:acme:`;
      // What such a worker leaves: append as today, then move the marker where it wrote it.
      const asBefore = async (id: string) => {
        await redis.rename(keys.marker(id), keys.legacyMarker(id));
        await redis.hdel(keys.legacyMarker(id), 'user');
        await redis.set(notificationIndexKey(base, id), user, 'PX', 60_000);
      };
      const id = notificationIdFor(user);
      const first = await inbox.append(sent(id, user));
      await asBefore(id);
      expect(await inbox.locate(id)).toBe(user);
      expect(await inbox.statusById(id)).toMatchObject({ userId: user, state: 'inbox', delivered: false });
      expect(await inbox.markerKey(user, id)).toBe(keys.legacyMarker(id));
      // A job run again by an upgraded worker (it stalled on the old one) is not stored twice.
      const again = await inbox.append(sent(id, user), { rerun: true });
      expect(again).toMatchObject({
        outcome: 'already-appended',
        offset: first.outcome === 'appended' ? first.offset : '',
      });
      expect((await inbox.read(user)).entries.map((entry) => entry.id)).toEqual([id]);
      expect(await redis.exists(keys.marker(id))).toBe(0);
      // Acked through an upgraded realtime server: recorded where it is, and read back everywhere.
      expect((await inbox.acknowledge(user, [id], 'rt-new')).ids).toEqual([id]);
      expect(await inbox.status(user, id)).toMatchObject({ delivered: true, deliveredBy: 'rt-new' });
      expect((await inbox.list(user)).items.map((item) => item.deliveredAt !== null)).toEqual([true]);

      // Cancelled by a gateway from before: the append stores nothing.
      const cancelledBefore = notificationIdFor(user);
      await redis.hset(keys.legacyMarker(cancelledBefore), 'state', 'cancelled', 'at', Date.now());
      expect((await inbox.append(sent(cancelledBefore, user), { rerun: true })).outcome).toBe('cancelled');
      expect(await inbox.cancel(user, cancelledBefore)).toMatchObject({ state: 'cancelled' });
      // Cancelled by an upgraded gateway: a worker from before (it reads the user's keys) sees it too.
      const cancelledNow = notificationIdFor(user);
      expect(await inbox.cancel(user, cancelledNow)).toMatchObject({ state: 'cancelled' });
      expect(await redis.hget(keys.legacyMarker(cancelledNow), 'state')).toBe('cancelled');
      expect(await redis.hget(keys.marker(cancelledNow), 'user')).toBe(user);
      expect((await inbox.read(user)).entries.map((entry) => entry.id)).toEqual([id]);
    });

    it('ids that are not routed (written before, or a topic’s) keep their id index, as before', async () => {
      const { inbox, user } = setup();
      const neighbour = neighbourOf(user);
      for (const id of [randomUUID(), 'n-1', unroutedId(notificationIdFor(user))]) {
        await inbox.append(sent(id, user));
        expect(await redis.get(notificationIndexKey(inbox.prefix, id))).toBe(user);
        expect(await inbox.statusById(id)).toMatchObject({ userId: user, state: 'inbox' });
        expect(await inbox.status(neighbour, id)).toBeUndefined();
      }
      // One id for two users (a topic send): two records, one per user.
      const topicId = randomUUID();
      await inbox.append(sent(topicId, user), { indexed: false });
      await inbox.append(sent(topicId, neighbour), { indexed: false });
      expect(await inbox.status(user, topicId)).toMatchObject({ userId: user, state: 'inbox' });
      expect(await inbox.status(neighbour, topicId)).toMatchObject({ userId: neighbour, state: 'inbox' });
    });

    it('many routed ids in one batch of appends, users spread over slots: each stored once, found by id', async () => {
      const { inbox } = setup();
      const users = Array.from({ length: 40 }, () => randomId('u'));
      const ids = users.map((user) => notificationIdFor(user));
      const results = await Promise.all(users.map((user, i) => inbox.append(sent(ids[i] ?? '', user))));
      expect(results.map((result) => result.outcome)).toEqual(users.map(() => 'appended'));
      const statuses = await Promise.all(ids.map((id) => inbox.statusById(id)));
      expect(statuses.map((status) => status?.userId)).toEqual(users);
    });
  });
});
