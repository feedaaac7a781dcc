import { randomId, testRedis } from '@herald/testing';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compareOffsets, Inbox, type InboxNotification, offsetSeq, ZERO_OFFSET } from '../src/index.js';

describe('inbox', () => {
  let redis: Redis | Cluster;
  beforeAll(() => {
    redis = testRedis();
  });
  afterAll(() => redis.disconnect());

  function setup(options: { maxLength?: number; maxAgeMs?: number } = {}) {
    return { inbox: new Inbox(redis, { prefix: `${randomId('inbox')}:`, ...options }), user: randomId('u') };
  }
  function notification(userId: string, n: number): InboxNotification {
    return { id: `n-${n}`, userId, payload: { n }, createdAt: new Date().toISOString() };
  }

  it('appends with gapless offsets and replays after an offset, in order', async () => {
    const { inbox, user } = setup();
    const offsets: string[] = [];
    for (let n = 1; n <= 10; n++) {
      const result = await inbox.append(notification(user, n));
      if (result.outcome !== 'appended') throw new Error(result.outcome);
      offsets.push(result.offset);
    }
    expect(offsets.map(offsetSeq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    const page = await inbox.read(user, { after: offsets[3] });
    expect(page.entries.map((e) => e.payload.n)).toEqual([5, 6, 7, 8, 9, 10]);
    expect(page.entries[0]).toMatchObject({ id: 'n-5', userId: user, offset: offsets[4] });
    expect(page).toMatchObject({ trimmed: false, unknownOffset: false, lastOffset: offsets[9] });
    expect((await inbox.read(user, { after: offsets[9] })).entries).toEqual([]);
    expect((await inbox.read(user)).entries).toHaveLength(10);
    expect(await inbox.latestOffset(user)).toBe(offsets[9]);
    expect(await inbox.latestOffset(randomId('empty'))).toBe(ZERO_OFFSET);
  });

  it('lists backwards: the newest page first, then each older page, oldest first within a page', async () => {
    const { inbox, user } = setup({ maxLength: 8 });
    for (let n = 1; n <= 10; n++) await inbox.append(notification(user, n));
    await inbox.markRead(user, { ids: ['n-9'] });
    const ns = (page: { items: { payload: unknown }[] }) =>
      page.items.map((item) => (item.payload as { n: number }).n);
    const newest = await inbox.list(user, { newest: true, limit: 3 });
    expect(ns(newest)).toEqual([8, 9, 10]);
    expect(newest.items.map((item) => item.read)).toEqual([false, true, false]);
    expect(newest).toMatchObject({ nextAfter: null, trimmed: false, unread: { count: 7 } });
    const older = await inbox.list(user, { before: newest.nextBefore ?? '', limit: 3 });
    expect(ns(older)).toEqual([5, 6, 7]);
    // The oldest kept (3; 1 and 2 were trimmed) ends it.
    const oldest = await inbox.list(user, { newest: true, before: older.nextBefore ?? '', limit: 3 });
    expect(ns(oldest)).toEqual([3, 4]);
    expect(oldest.nextBefore).toBeNull();
    // A full page that happens to reach the oldest ends it too (before: it pointed one page back, which
    // was empty: a "show older" offered for nothing).
    const exact = await inbox.list(user, { before: older.items[0]?.offset ?? '', limit: 2 });
    expect(ns(exact)).toEqual([3, 4]);
    expect(exact.nextBefore).toBeNull();
    // So does a forward page that reaches the newest.
    const forward = await inbox.list(user, { after: older.items.at(-1)?.offset ?? '', limit: 3 });
    expect(ns(forward)).toEqual([8, 9, 10]);
    expect(forward.nextAfter).toBeNull();
    // Nothing is before the first offset there can be (Redis refuses the range itself).
    for (const before of ['0-0', '000-00']) {
      expect(await inbox.list(user, { before })).toMatchObject({ items: [], nextBefore: null });
    }
    // An empty inbox, a forward page (no nextBefore), and what cannot be asked.
    expect(await inbox.list(randomId('empty'), { newest: true })).toMatchObject({
      items: [],
      nextBefore: null,
    });
    expect(await inbox.list(user, { limit: 1 })).not.toHaveProperty('nextBefore');
    await expect(inbox.list(user, { after: '0-0', newest: true })).rejects.toMatchObject({
      code: 'HERALD_ERR_INBOX_INVALID_ARGUMENT',
    });
    await expect(inbox.list(user, { before: 'nope' })).rejects.toMatchObject({
      code: 'HERALD_ERR_INBOX_INVALID_OFFSET',
    });
  });

  it('is idempotent: the same notification appended twice is stored once and answers its first offset', async () => {
    const { inbox, user } = setup();
    const first = await inbox.append(notification(user, 1));
    const again = await inbox.append(notification(user, 1));
    expect(first.outcome).toBe('appended');
    expect(again).toMatchObject({
      outcome: 'already-appended',
      offset: (first as { offset: string }).offset,
    });
    expect((await inbox.read(user)).entries).toHaveLength(1);
    // One change (the first append), counted from where a new inbox's version starts.
    expect(await inbox.unread(user)).toEqual({
      count: 1,
      version: (first as { unread: { version: number } }).unread.version,
    });
    expect(again.unread).toEqual({ count: 1, version: first.unread.version });
  });

  it('trims by length, reports the trimmed gap, and keeps the unread count exact', async () => {
    const { inbox, user } = setup({ maxLength: 3 });
    const offsets: string[] = [];
    for (let n = 1; n <= 5; n++) {
      await inbox.append(notification(user, n));
      offsets.push(await inbox.latestOffset(user));
    }
    const all = await inbox.read(user);
    expect(all.entries.map((e) => e.id)).toEqual(['n-3', 'n-4', 'n-5']);
    expect((await inbox.unread(user)).count).toBe(3);
    expect((await inbox.read(user, { after: offsets[0] })).trimmed).toBe(true);
    expect((await inbox.read(user, { after: offsets[1] })).trimmed).toBe(false);
    expect((await inbox.read(user, { after: '99999999999999-9' })).unknownOffset).toBe(true);
  });

  it('only 0-0 means "everything kept": another <ms>-0 past the newest is unknown, one before a trimmed start is trimmed', async () => {
    // A client's lastOffset of `<ms>-0` past the newest used to be taken as 0-0: the socket then
    // started after it and dropped every live notification as "already sent", forever.
    const { inbox, user } = setup({ maxLength: 3 });
    for (let n = 1; n <= 5; n++) await inbox.append(notification(user, n));
    expect(await inbox.read(user, { after: '99999999999999-0' })).toMatchObject({
      entries: [],
      unknownOffset: true,
    });
    expect(await inbox.read(user, { after: '1-0' })).toMatchObject({ trimmed: true });
    expect(await inbox.read(user, { after: '0-0' })).toMatchObject({ trimmed: false, unknownOffset: false });
    const empty = randomId('empty');
    expect(await inbox.read(empty, { after: '0-0' })).toMatchObject({ unknownOffset: false });
    expect(await inbox.read(empty, { after: '5-0' })).toMatchObject({ unknownOffset: true });
  });

  it('trims by age', async () => {
    const { inbox, user } = setup({ maxAgeMs: 1000 });
    const t0 = Date.now();
    await inbox.append(notification(user, 1), { nowMs: t0 });
    await inbox.append(notification(user, 2), { nowMs: t0 + 500 });
    await inbox.append(notification(user, 3), { nowMs: t0 + 1400 });
    expect((await inbox.read(user)).entries.map((e) => e.id)).toEqual(['n-2', 'n-3']);
    expect((await inbox.unread(user)).count).toBe(2);
  });

  it('offsets never go backwards when the clock does', async () => {
    const { inbox, user } = setup();
    const a = await inbox.append(notification(user, 1), { nowMs: 2_000_000 });
    const b = await inbox.append(notification(user, 2), { nowMs: 1_000_000 });
    if (a.outcome !== 'appended' || b.outcome !== 'appended') throw new Error('not appended');
    expect(compareOffsets(a.offset, b.offset)).toBeLessThan(0);
  });

  it('records expired and deduplicated notifications without storing them', async () => {
    const { inbox, user } = setup();
    const expired = await inbox.append(notification(user, 1), { expiresAtMs: Date.now() - 1 });
    expect(expired.outcome).toBe('expired');
    expect((await inbox.append(notification(user, 1))).outcome).toBe('expired');
    expect(await inbox.status(user, 'n-1')).toMatchObject({
      state: 'expired',
      delivered: false,
      offset: null,
    });

    expect((await inbox.append(notification(user, 2), { dedupeKey: 'k' })).outcome).toBe('appended');
    expect(await inbox.append(notification(user, 3), { dedupeKey: 'k' })).toMatchObject({
      outcome: 'deduplicated',
      duplicateOf: 'n-2',
    });
    expect((await inbox.append(notification(user, 4), { dedupeKey: 'other' })).outcome).toBe('appended');
    expect((await inbox.read(user)).entries.map((e) => e.id)).toEqual(['n-2', 'n-4']);
    expect(await inbox.status(user, 'n-3')).toMatchObject({ state: 'deduplicated', duplicateOf: 'n-2' });
  });

  it('cancels a notification not stored yet: a later append stores nothing; a stored one stays stored', async () => {
    const prefix = `${randomId('inbox')}:`;
    const user = randomId('u');
    const inbox = new Inbox(redis, { prefix }).tenant('acme');
    // The worker's side on a connection of its own, so that the race below is one.
    const other = testRedis();
    const worker = new Inbox(other, { prefix }).tenant('acme');
    const cancelled = await inbox.cancel(user, 'n-1');
    expect(cancelled.state).toBe('cancelled');
    // Cancelling again answers the first cancel, with its time.
    expect(await inbox.cancel(user, 'n-1')).toEqual(cancelled);
    // The worker's append (a job already running, or retried) comes second: nothing is stored or counted.
    expect(await inbox.append(notification(user, 1))).toMatchObject({
      outcome: 'cancelled',
      unread: { count: 0 },
    });
    expect((await inbox.read(user)).entries).toEqual([]);
    expect(await inbox.statusById('n-1')).toMatchObject({
      state: 'cancelled',
      userId: user,
      tenantId: 'acme',
      delivered: false,
      offset: null,
      cancelledAt: new Date(Number(cancelled.at)).toISOString(),
    });
    // Stored first: the cancel answers the stored state and changes nothing.
    await inbox.append(notification(user, 2));
    expect((await inbox.cancel(user, 'n-2')).state).toBe('inbox');
    expect((await inbox.read(user)).entries.map((e) => e.id)).toEqual(['n-2']);
    expect(await inbox.status(user, 'n-2')).toMatchObject({ state: 'inbox' });
    // Two cancels and an append racing: one state wins, in every pass.
    for (let n = 3; n < 23; n++) {
      const [a, b, c] = await Promise.all([
        inbox.cancel(user, `n-${n}`),
        worker.append(notification(user, n)),
        inbox.cancel(user, `n-${n}`),
      ]);
      const stored = (await inbox.read(user)).entries.some((e) => e.id === `n-${n}`);
      // Stored: the append came first, and both cancels saw it. Not stored: a cancel came first.
      expect({ stored, append: b.outcome, cancels: [a.state, c.state] }).toEqual(
        stored
          ? { stored, append: 'appended', cancels: ['inbox', 'inbox'] }
          : { stored, append: 'cancelled', cancels: ['cancelled', 'cancelled'] },
      );
    }
    other.disconnect();
  });

  it('records delivered once, with time and instance, only for the user’s own notifications', async () => {
    const { inbox, user } = setup();
    const other = randomId('other');
    await inbox.append(notification(user, 1));
    await inbox.append(notification(other, 2));
    expect(await inbox.status(user, 'n-1')).toMatchObject({ delivered: false, deliveredBy: null });
    expect(await inbox.ack(user, ['n-1', 'n-2', 'missing'], 'rt-a')).toBe(1);
    expect(await inbox.ack(user, ['n-1'], 'rt-b')).toBe(0);
    await inbox.append(notification(user, 3));
    const first = await inbox.acknowledge(user, ['n-1', 'n-3', 'n-3'], 'rt-b');
    expect(first.ids).toEqual(['n-3']);
    expect((await inbox.acknowledge(user, ['n-3'], 'rt-a')).ids).toEqual([]);
    const status = await inbox.status(user, 'n-1');
    expect(status).toMatchObject({ state: 'inbox', delivered: true, deliveredBy: 'rt-a', read: false });
    expect(Number.isNaN(Date.parse(status?.deliveredAt ?? ''))).toBe(false);
    expect(await inbox.status(other, 'n-2')).toMatchObject({ delivered: false });
    expect(await inbox.status(user, 'n-2')).toBeUndefined();
  });

  it('answers when a read happened by Redis’s clock, not before the first ack (webhooks report both)', async () => {
    const { inbox, user } = setup();
    await inbox.append(notification(user, 1));
    await inbox.append(notification(user, 2));
    const [seconds, micros] = await redis.time();
    const before = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    const acked = await inbox.acknowledge(user, ['n-1'], 'rt-a');
    const read = await inbox.markRead(user, { ids: ['n-1'] });
    expect(read.readAtMs).toBeGreaterThanOrEqual(acked.deliveredAtMs);
    expect(acked.deliveredAtMs).toBeGreaterThanOrEqual(before);
    const [secondsAfter, microsAfter] = await redis.time();
    expect(read.readAtMs).toBeLessThanOrEqual(Number(secondsAfter) * 1000 + Number(microsAfter) / 1000);
    // Nothing changed still says when: the same clock, whatever the selection.
    const none = await inbox.markRead(user, { ids: ['n-1'] });
    expect(none.readAtMs).toBeGreaterThanOrEqual(read.readAtMs);
    expect((await inbox.markRead(user, { all: true })).readAtMs).toBeGreaterThanOrEqual(none.readAtMs);
  });

  it('the unread version never goes backwards when an idle inbox expires and comes back (a client keeps the highest)', async () => {
    const { inbox, user } = setup();
    for (let n = 1; n <= 4; n++) await inbox.append(notification(user, n));
    const before = (await inbox.markRead(user, { ids: ['n-1', 'n-2'] })).unread;
    expect(before.count).toBe(2);
    // Its stream, meta and unread set expire together (one TTL): as if the user had been idle that long.
    const keys = inbox.keys(user);
    for (const key of [keys.stream, keys.meta, keys.unread]) await redis.del(key);
    const idle = await inbox.unread(user);
    expect(idle.count).toBe(0);
    expect(idle.version).toBeGreaterThan(before.version);
    const appended = await inbox.append(notification(user, 5));
    if (appended.outcome !== 'appended') throw new Error(appended.outcome);
    expect(appended.unread.count).toBe(1);
    expect(appended.unread.version).toBeGreaterThan(idle.version);
    // It goes on by one per change from there.
    const read = await inbox.markRead(user, { ids: ['n-5'] });
    expect(read.unread).toEqual({ count: 0, version: appended.unread.version + 1 });
    expect(await inbox.unread(user)).toEqual(read.unread);
    // A read that finds the unread set alone (its meta gone) does not start over either.
    await inbox.append(notification(user, 6));
    const last = (await inbox.unread(user)).version;
    await redis.del(keys.meta);
    expect((await inbox.markRead(user, { ids: ['n-6'] })).unread.version).toBeGreaterThan(last);
  });

  it('a page holds at most about 1 MiB of notifications whatever its limit, and says there is more (forwards, backwards, and a reader that pages on)', async () => {
    const { inbox, user } = setup();
    // 80 notifications of ~16 KB (the largest payload a send may carry): ~1.3 MB in all.
    const big = 'x'.repeat(16_000);
    for (let n = 1; n <= 80; n++) {
      await inbox.append({
        id: `n-${n}`,
        userId: user,
        payload: { n, big },
        createdAt: new Date().toISOString(),
      });
    }
    const first = await inbox.read(user, { limit: 1000 });
    expect(first.entries.length).toBeGreaterThan(0);
    expect(first.entries.length).toBeLessThan(80);
    expect(JSON.stringify(first.entries).length).toBeLessThan(1_300_000);
    expect(first.more).toBe(true);
    // Paging on from each page's last offset reads every one once, in order.
    const seen = [...first.entries];
    for (let page = first; page.more; ) {
      page = await inbox.read(user, { after: page.lastOffset, limit: 1000 });
      seen.push(...page.entries);
    }
    expect(seen.map((entry) => (entry.payload as { n: number }).n)).toEqual(
      Array.from({ length: 80 }, (_, i) => i + 1),
    );
    // The listing, forwards and backwards: cut likewise, with where to go on from.
    const forwards = await inbox.list(user, { limit: 1000 });
    expect(forwards.items.length).toBe(first.entries.length);
    expect(forwards.nextAfter).toBe(first.lastOffset);
    const backwards = await inbox.list(user, { newest: true, limit: 1000 });
    expect(backwards.items.length).toBeLessThan(80);
    expect(backwards.items.at(-1)?.id).toBe('n-80');
    expect(backwards.nextBefore).toBe(backwards.items[0]?.offset);
    // Small notifications: the limit is the bound, as before.
    const small = setup();
    for (let n = 1; n <= 5; n++) await small.inbox.append(notification(small.user, n));
    const all = await small.inbox.read(small.user, { limit: 5 });
    expect(all.entries).toHaveLength(5);
    expect((await small.inbox.read(small.user, { limit: 10 })).more).toBe(false);
  });

  it('marks read by id, up to an offset, and all, with an exact count and growing version', async () => {
    const { inbox, user } = setup();
    const offsets: string[] = [];
    for (let n = 1; n <= 6; n++) {
      const r = await inbox.append(notification(user, n));
      if (r.outcome === 'appended') offsets.push(r.offset);
    }
    const v0 = (await inbox.unread(user)).version;
    expect(await inbox.markRead(user, { ids: ['n-1', 'n-1', 'nope'] })).toEqual({
      changed: 1,
      unread: { count: 5, version: v0 + 1 },
      ids: ['n-1'],
      readAtMs: expect.any(Number),
    });
    expect(await inbox.markRead(user, { ids: ['n-1'] })).toEqual({
      changed: 0,
      unread: { count: 5, version: v0 + 1 },
      ids: [],
      readAtMs: expect.any(Number),
    });
    expect((await inbox.markRead(user, { all: true, upTo: offsets[2] ?? '' })).ids).toEqual(['n-2', 'n-3']);
    const listing = await inbox.list(user, { limit: 4 });
    expect(listing.items.map((i) => [i.id, i.read])).toEqual([
      ['n-1', true],
      ['n-2', true],
      ['n-3', true],
      ['n-4', false],
    ]);
    expect(listing.unread.count).toBe(3);
    expect(listing.nextAfter).toBe(offsets[3]);
    const next = await inbox.list(user, { after: listing.nextAfter ?? '', limit: 4 });
    expect(next.items.map((i) => i.id)).toEqual(['n-5', 'n-6']);
    expect(next.nextAfter).toBeNull();
    const rest = await inbox.markRead(user, { all: true });
    expect(rest.unread.count).toBe(0);
    expect([...rest.ids].sort()).toEqual(['n-4', 'n-5', 'n-6']);
  });

  it('finds a status by notification id alone, with the sender’s tenant', async () => {
    const { inbox: root, user } = setup();
    const inbox = root.tenant('acme');
    const id = randomId('n');
    await inbox.append({ id, userId: user, payload: {}, createdAt: new Date().toISOString() });
    expect(await inbox.locate(id)).toBe(user);
    expect(await inbox.statusById(id)).toMatchObject({
      id,
      userId: user,
      state: 'inbox',
      tenantId: 'acme',
      delivered: false,
    });
    expect(await inbox.statusById(randomId('nope'))).toBeUndefined();
  });

  it('keeps a notification’s records maxAgeMs + recordGraceMs, and refuses a grace below 1 ms', async () => {
    const prefix = `${randomId('inbox')}:`;
    const user = randomId('u');
    const inbox = new Inbox(redis, { prefix, maxAgeMs: 30_000, recordGraceMs: 60_000 });
    expect(inbox.retentionMs).toBe(90_000);
    await inbox.append(notification(user, 1));
    for (const key of [inbox.keys(user).marker('n-1'), `${prefix}id:{n-1}`]) {
      const ttl = await redis.pttl(key);
      expect(ttl).toBeGreaterThan(80_000);
      expect(ttl).toBeLessThanOrEqual(90_000);
    }
    expect(new Inbox(redis, { prefix }).retentionMs).toBe(31 * 24 * 3600 * 1000);
    expect(() => new Inbox(redis, { prefix, recordGraceMs: 0 })).toThrow(/recordGraceMs/);
  });

  it('refuses malformed offsets, limits and prefixes with coded errors', async () => {
    const { inbox, user } = setup();
    await expect(inbox.read(user, { after: 'abc' })).rejects.toMatchObject({
      code: 'HERALD_ERR_INBOX_INVALID_OFFSET',
    });
    await expect(inbox.list(user, { limit: 0 })).rejects.toMatchObject({
      code: 'HERALD_ERR_INBOX_INVALID_ARGUMENT',
    });
    expect(() => new Inbox(redis, { prefix: 'a{b}:' })).toThrow(/brace/);
  });

  it('keeps every key of one user in one hash slot, whatever the user id', () => {
    const inbox = new Inbox(redis, { prefix: 'p:' });
    const keys = inbox.keys('we{ir}d%');
    expect(keys.stream).toBe('p:{we%7Bir%7Dd%25}:s');
    const tag = (key: string) => key.slice(key.indexOf('{') + 1, key.indexOf('}'));
    for (const key of [keys.meta, keys.unread, keys.marker('x{y}'), keys.dedupe('{z}'), keys.mutes]) {
      expect(tag(key)).toBe(tag(keys.stream));
    }
  });

  it('keeps tenants apart: one user id in two tenants is two inboxes, counts, dedupe keys and indexes', async () => {
    const { inbox, user } = setup();
    const acme = inbox.tenant('acme');
    const globex = inbox.tenant('globex');
    expect(inbox.tenant('default')).toBe(inbox);
    await acme.append(notification(user, 1), { dedupeKey: 'same' });
    const second = await globex.append(notification(user, 2), { dedupeKey: 'same' });
    expect(second.outcome).toBe('appended');
    // The same notification id in two tenants is two notifications.
    expect((await globex.append(notification(user, 1))).outcome).toBe('appended');
    expect((await acme.read(user)).entries.map((e) => e.id)).toEqual(['n-1']);
    expect((await globex.read(user)).entries.map((e) => e.id)).toEqual(['n-2', 'n-1']);
    expect((await inbox.read(user)).entries).toEqual([]);
    expect(await acme.unread(user)).toMatchObject({ count: 1 });
    expect((await globex.markRead(user, { ids: ['n-2'] })).changed).toBe(1);
    expect((await acme.markRead(user, { ids: ['n-2'] })).changed).toBe(0);
    expect(await acme.locate('n-2')).toBeUndefined();
    expect(await globex.statusById('n-2')).toMatchObject({ userId: user, read: true });
    // The default tenant keeps the layout of before tenants; others live under `t:<tenant>:`.
    expect(inbox.keys(user).stream).toBe(`${inbox.prefix}{${user}}:s`);
    expect(acme.keys(user).stream).toBe(`${inbox.prefix}t:acme:{${user}}:s`);
    expect(() => inbox.tenant('a/b')).toThrow(
      expect.objectContaining({ code: 'HERALD_ERR_INBOX_INVALID_ARGUMENT' }),
    );
    expect(() => inbox.tenant('x{y}')).toThrow();
  });
});
