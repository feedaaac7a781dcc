import { randomId, testRedis } from '@herald/testing';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AppendResult, Inbox, type InboxNotification, offsetSeq, parseOffset } from '../src/index.js';

// append-n.lua keeps the top offset (tm, ts), the length (n) and a lower bound of the head's ms (hm) in
// the user's meta hash. These tests run appends, retries, batches, reads, acks, cancels and damage to
// the meta or the stream against a model of the inbox, and check after every step that offsets stay
// gapless, the unread count and version are exact, and the cached fields say what the stream holds.

/** mulberry32: the same sequence of steps on every run. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Entry {
  id: string;
  seq: number;
  ms: number;
}

/** What the inbox of one user must hold, step by step. */
class Model {
  entries: Entry[] = [];
  unread = new Set<string>();
  /**
   * Where the unread version started when the meta was (re)created: Redis's time in ms × 1000 (the
   * injected clock's when there is one); undefined while there is no meta or it is not learned yet.
   */
  base: number | undefined = undefined;
  /** Changes of the unread set since then. */
  changes = 0;
  /** The highest version seen: a version never goes back. */
  highest = 0;
  topSeq = 0;
  topMs = 0;
  /** Outcome and offset seq of every id processed. */
  processed = new Map<string, { outcome: AppendResult['outcome']; seq?: number }>();
  cancelled = new Set<string>();

  constructor(
    readonly maxLength: number,
    readonly maxAgeMs: number,
  ) {}

  /** One append of `id` at `now` (undefined: Redis's clock, with no age trim to predict). */
  append(id: string, now: number | undefined): { outcome: AppendResult['outcome']; seq?: number } {
    const previous = this.processed.get(id);
    if (previous !== undefined) {
      return previous.outcome === 'appended'
        ? { outcome: 'already-appended', seq: previous.seq ?? 0 }
        : previous;
    }
    if (this.cancelled.has(id)) {
      this.processed.set(id, { outcome: 'cancelled' });
      return { outcome: 'cancelled' };
    }
    const seq = this.topSeq + 1;
    // Redis's clock (now undefined): the caller sets the ms from the reply.
    const ms = now === undefined ? this.topMs : Math.max(now, this.topMs);
    this.topSeq = seq;
    this.topMs = ms;
    this.entries.push({ id, seq, ms });
    this.unread.add(id);
    this.change(now);
    let remove = Math.max(0, this.entries.length - this.maxLength);
    if (now !== undefined) {
      const old = this.entries.filter((e) => e.ms < now - this.maxAgeMs).length;
      remove = Math.max(remove, old);
    }
    for (const entry of this.entries.splice(0, remove)) this.unread.delete(entry.id);
    this.processed.set(id, { outcome: 'appended', seq });
    return { outcome: 'appended', seq };
  }

  read(ids: string[]): number {
    let changed = 0;
    for (const id of ids) if (this.unread.delete(id)) changed++;
    if (changed > 0) this.change(undefined);
    return changed;
  }

  /** One change of the unread set at `now` (undefined: Redis's clock): a new meta starts from the time. */
  change(now: number | undefined): void {
    if (this.changes === 0 && this.base === undefined && now !== undefined) {
      this.base = now * 1000;
      // The test's clock set back (never Redis's): no claim that the new start is above the old versions.
      if (this.base < this.highest) this.highest = 0;
    }
    this.changes++;
  }

  /**
   * The meta is gone: the next change starts the version from the time again. The steps' injected clocks
   * run ahead of Redis's and back: versions from them say nothing of the order of Redis's own (inbox.test.ts
   * checks that a version never goes back on Redis's clock).
   */
  lost(): void {
    this.highest = 0;
    this.base = undefined;
    this.changes = 0;
  }

  /** The version now, as the inbox must answer it (learning the base from `actual` when unknown). */
  version(actual: number): number {
    if (this.base === undefined && this.changes > 0) this.base = actual - this.changes;
    const version = this.base === undefined ? actual : this.base + this.changes;
    expect(version).toBeGreaterThanOrEqual(this.highest);
    this.highest = version;
    return version;
  }
}

/** `unread` as `model` says it must be (its version checked against what came: see Model.version). */
function expectUnread(actual: { count: number; version: number } | undefined, model: Model, label: string) {
  expect(actual, label).toEqual({ count: model.unread.size, version: model.version(actual?.version ?? -1) });
}

describe('append-n.lua cached top, length and head', () => {
  let redis: Redis | Cluster;
  beforeAll(() => {
    redis = testRedis();
  });
  afterAll(() => redis.disconnect());

  /**
   * The meta's cached fields (`c`: struct '<Bddddd', format 1, then tm, ts, n, hm, xa), or undefined
   * when it has none or they are not trusted (`n` is not -1: the script before `c` wrote since).
   */
  async function cache(
    meta: string,
  ): Promise<{ tm: number; ts: number; n: number; hm: number; xa: number } | undefined> {
    const [c, n] = await redis.hmgetBuffer(meta, 'c', 'n');
    if (!c || c.length !== 41 || c[0] !== 1 || n?.toString() !== '-1') return undefined;
    const [tm, ts, length, hm, xa] = [1, 9, 17, 25, 33].map((at) => c.readDoubleLE(at)) as number[];
    return { tm: tm ?? 0, ts: ts ?? 0, n: length ?? 0, hm: hm ?? 0, xa: xa ?? 0 };
  }

  /** Writes the meta's cached fields with `change` made to them (damage on purpose). */
  async function damageCache(meta: string, change: Partial<{ tm: number; ts: number; n: number }>) {
    const now = await cache(meta);
    if (now === undefined) return;
    const next = { ...now, ...change };
    const c = Buffer.alloc(41);
    c[0] = 1;
    for (const [i, value] of [next.tm, next.ts, next.n, next.hm, next.xa].entries()) {
      c.writeDoubleLE(value, 1 + 8 * i);
    }
    await redis.hset(meta, 'c', c);
  }

  function notification(userId: string, id: string): InboxNotification {
    return { id, userId, payload: { id }, createdAt: new Date().toISOString() };
  }

  /** What Redis holds agrees with the model, and (unless `damaged`) the meta's cached fields with the stream. */
  async function expectAgrees(inbox: Inbox, user: string, model: Model, step: string, damaged = false) {
    const keys = inbox.keys(user);
    const stream = (await redis.xrange(keys.stream, '-', '+')) as [string, string[]][];
    const ids = stream.map(([, fields]) => fields[fields.indexOf('id') + 1]);
    expect(ids, step).toEqual(model.entries.map((e) => e.id));
    expect(
      stream.map(([offset]) => offsetSeq(offset)),
      step,
    ).toEqual(model.entries.map((e) => e.seq));
    expectUnread(await inbox.unread(user), model, step);
    expect((await redis.smembers(keys.unread)).sort(), step).toEqual([...model.unread].sort());
    const cached = await cache(keys.meta);
    // Damaged on purpose (until the next append repairs it): only what the stream says is checked.
    if (!damaged && cached !== undefined && stream.length > 0) {
      expect(cached.n, step).toBe(stream.length);
      const top = parseOffset(stream.at(-1)?.[0] ?? '');
      expect({ tm: cached.tm, ts: cached.ts }, step).toEqual({ tm: top.ms, ts: top.seq });
      expect(cached.hm, step).toBeLessThanOrEqual(parseOffset(stream[0]?.[0] ?? '').ms);
    }
  }

  async function expectTtls(inbox: Inbox, user: string, ids: string[], step: string) {
    const keys = inbox.keys(user);
    for (const key of [keys.stream, keys.meta, keys.unread, ...ids.map((id) => keys.marker(id))]) {
      expect(await redis.pttl(key), `${step}: ${key}`).toBeGreaterThan(0);
    }
  }

  it('keeps offsets gapless and counts exact through appends, retries, batches, reads, acks, cancels and damage', async () => {
    const next = random(42);
    const pick = <T>(items: T[]): T | undefined => items[Math.floor(next() * items.length)];
    const inbox = new Inbox(redis, { prefix: `${randomId('cache')}:`, maxLength: 6 });
    const user = randomId('u');
    const keys = inbox.keys(user);
    const model = new Model(6, inbox.maxAgeMs);
    let fresh = 0;
    let damaged = false;
    const newId = () => `n-${++fresh}`;
    for (let step = 0; step < 160; step++) {
      const roll = next();
      const label = `step ${step}`;
      const length = model.topSeq;
      if (roll < 0.3) {
        // One append, alone, on a clock that mostly moves forward (sometimes back: ms never goes below the top's).
        const id = newId();
        const now = Date.now() + step * 50 - (next() < 0.1 ? 5000 : 0);
        const result = await inbox.append(notification(user, id), { nowMs: now });
        const expected = model.append(id, now);
        expect(result.outcome, label).toBe(expected.outcome);
        if (result.outcome === 'appended') {
          expect(offsetSeq(result.offset), label).toBe(expected.seq);
          expect(parseOffset(result.offset).ms, label).toBe(model.topMs);
        }
        expectUnread(result.unread, model, label);
        await expectTtls(inbox, user, [id], label);
      } else if (roll < 0.55) {
        // Several notifications of this user in one script call (one event-loop turn), with retries of
        // earlier ones and of one in this very call, and a cancelled one.
        const ids = Array.from({ length: 1 + Math.floor(next() * 8) }, newId);
        const earlier = pick([...model.processed.keys()]);
        if (earlier !== undefined) ids.splice(Math.floor(next() * ids.length), 0, earlier);
        if (next() < 0.3) ids.push(ids[0] ?? '');
        if (next() < 0.3) {
          const cancelled = newId();
          await inbox.cancel(user, cancelled);
          model.cancelled.add(cancelled);
          ids.splice(Math.floor(next() * ids.length), 0, cancelled);
        }
        const results = await Promise.all(ids.map((id) => inbox.append(notification(user, id))));
        for (const [i, id] of ids.entries()) {
          const expected = model.append(id, undefined);
          const result = results[i];
          expect(result?.outcome, `${label} #${i}`).toBe(expected.outcome);
          if (result?.outcome === 'appended' || result?.outcome === 'already-appended') {
            expect(offsetSeq(result.offset), `${label} #${i}`).toBe(expected.seq);
          }
          if (result?.outcome === 'appended') {
            // Redis's clock: the model takes the ms the call used.
            const { ms } = parseOffset(result.offset);
            expect(ms, `${label} #${i}`).toBeGreaterThanOrEqual(model.topMs);
            model.topMs = ms;
            const entry = model.entries.find((e) => e.id === id);
            if (entry) entry.ms = ms;
          }
        }
        // The call's last reply carries the count and version after all of it.
        expectUnread(results.at(-1)?.unread, model, label);
        await expectTtls(inbox, user, [...new Set(ids)], label);
      } else if (roll < 0.65) {
        const ids = model.entries.filter(() => next() < 0.5).map((e) => e.id);
        const result = await inbox.markRead(user, { ids: [...ids, 'not-mine'] });
        expect(result.changed, label).toBe(model.read(ids));
        expectUnread(result.unread, model, label);
      } else if (roll < 0.7) {
        const upTo = pick(model.entries);
        if (upTo !== undefined) {
          const offset = (await redis.xrange(keys.stream, '-', '+')).find(
            ([, fields]) => fields[1] === upTo.id,
          )?.[0];
          const ids = model.entries.filter((e) => e.seq <= upTo.seq).map((e) => e.id);
          expect((await inbox.markRead(user, { all: true, upTo: offset ?? '' })).changed, label).toBe(
            model.read(ids),
          );
        }
      } else if (roll < 0.73) {
        expect((await inbox.markRead(user, { all: true })).changed, label).toBe(
          model.read([...model.unread]),
        );
      } else if (roll < 0.8) {
        await inbox.ack(user, model.entries.map((e) => e.id).slice(0, 3), 'test');
      } else if (roll < 0.84) {
        // Damage: the meta hash lost (deleted, evicted, expired): the unread version starts again from the
        // time, above every version before.
        await redis.del(keys.meta);
        model.lost();
      } else if (roll < 0.9) {
        // Older-format meta: only `uv`, as written before the cached fields existed.
        await redis.hdel(keys.meta, 'c', 'n');
      } else if (roll < 0.94) {
        // Out of step: a length that is not the stream's (the fields are then read from the stream).
        await damageCache(keys.meta, { n: 9999, ts: 1 });
      } else if (roll < 0.98) {
        // Out of step, length and all: a top behind the stream's at its own ms (XADD refuses the
        // offset, the top is read again). The same with a later ms is not detected (see append-n.lua).
        const { tm = 0, ts = 0 } = (await cache(keys.meta)) ?? {};
        if (ts > 2) {
          await damageCache(keys.meta, { ts: ts - 2 });
          const id = newId();
          const result = await inbox.append(notification(user, id), { nowMs: tm - 1000 });
          const expected = model.append(id, tm - 1000);
          expect(result.outcome === 'appended' && offsetSeq(result.offset), label).toBe(expected.seq);
        }
      } else {
        // The stream lost, the meta kept: numbering starts again at 1 (as before the cache).
        await redis.del(keys.stream);
        model.entries = [];
        model.topSeq = 0;
        model.topMs = 0;
      }
      if (roll >= 0.8 && (roll < 0.94 || roll >= 0.98)) damaged = true;
      else if (model.topSeq !== length) damaged = false;
      await expectAgrees(inbox, user, model, label, damaged);
    }
    expect(fresh).toBeGreaterThan(100);
  });

  it('trims by age exactly, the cached head sparing no entry that is too old', async () => {
    const maxAgeMs = 1000;
    const inbox = new Inbox(redis, { prefix: `${randomId('cache')}:`, maxAgeMs, maxLength: 50 });
    const user = randomId('u');
    const keys = inbox.keys(user);
    const model = new Model(50, maxAgeMs);
    const next = random(7);
    let now = Date.now();
    for (let step = 0; step < 120; step++) {
      // Gaps from 0 to 600 ms: some appends find old entries, most none; now and then the meta loses its
      // cached fields or the unread entries are read.
      now += Math.floor(next() * 600);
      const id = `n-${step}`;
      const result = await inbox.append(notification(user, id), { nowMs: now });
      const expected = model.append(id, now);
      if (result.outcome !== 'appended') throw new Error(result.outcome);
      expect(offsetSeq(result.offset), `step ${step}`).toBe(expected.seq);
      expectUnread(result.unread, model, `step ${step}`);
      if (next() < 0.1) await redis.hdel(keys.meta, 'c', 'n');
      if (next() < 0.1) {
        const ids = model.entries.slice(0, 2).map((e) => e.id);
        await inbox.markRead(user, { ids });
        model.read(ids);
      }
      await expectAgrees(inbox, user, model, `step ${step}`);
    }
    // A length bound smaller than the inbox's (an API key's bounds) in the same inbox.
    now += 10;
    await inbox.append(notification(user, 'small'), { nowMs: now, bounds: { maxLength: 2 } });
    const small = new Model(2, maxAgeMs);
    small.entries = model.entries;
    small.unread = model.unread;
    small.base = model.base;
    small.changes = model.changes;
    small.highest = model.highest;
    small.topSeq = model.topSeq;
    small.topMs = model.topMs;
    small.append('small', now);
    await expectAgrees(inbox, user, small, 'bounds');
  });

  it('continues the numbering of an inbox written before the cache (stream, unread set and uv only)', async () => {
    const inbox = new Inbox(redis, { prefix: `${randomId('cache')}:`, maxLength: 3 });
    const user = randomId('u');
    const keys = inbox.keys(user);
    const t0 = Date.now() - 60_000;
    for (let seq = 1; seq <= 5; seq++) {
      const id = `old-${seq}`;
      await redis.xadd(
        keys.stream,
        `${t0 + seq}-${seq}`,
        'id',
        id,
        'n',
        JSON.stringify(notification(user, id)),
      );
    }
    await redis.sadd(keys.unread, 'old-4', 'old-5');
    await redis.hset(keys.meta, 'uv', 7);
    const results = await Promise.all(['a', 'b'].map((id) => inbox.append(notification(user, id))));
    expect(results.map((r) => (r.outcome === 'appended' ? offsetSeq(r.offset) : r.outcome))).toEqual([6, 7]);
    expect(results.map((r) => r.unread)).toEqual([
      { count: 3, version: 8 },
      { count: 3, version: 9 },
    ]);
    const ids = (await inbox.read(user)).entries.map((e) => e.id);
    expect(ids).toEqual(['old-5', 'a', 'b']);
    expect(await cache(keys.meta)).toMatchObject({ ts: 7, n: 3 });
    const again = await inbox.append(notification(user, 'c'));
    expect(again).toMatchObject({ outcome: 'appended', unread: { count: 3, version: 10 } });
    expect(offsetSeq((again as { offset: string }).offset)).toBe(8);
  });

  it('numbers on from the stream when the script before the packed cache wrote since (an upgrade, both running)', async () => {
    const inbox = new Inbox(redis, { prefix: `${randomId('cache')}:`, maxLength: 3 });
    const user = randomId('u');
    const keys = inbox.keys(user);
    for (const id of ['a', 'b', 'c']) await inbox.append(notification(user, id));
    expect(await cache(keys.meta)).toMatchObject({ ts: 3, n: 3 });
    // What the script before `c` does for a fourth one at maxLength 3: XADD seq 4, the head trimmed, and
    // its own fields written (the length unchanged: 3, as `c` says, but its top is behind now).
    const ms = Date.now() + 5;
    await redis.xadd(keys.stream, `${ms}-4`, 'id', 'd', 'n', JSON.stringify(notification(user, 'd')));
    const [[head]] = (await redis.xrange(keys.stream, '-', '+', 'COUNT', 1)) as [[string, string[]]];
    await redis.xdel(keys.stream, head);
    await redis.srem(keys.unread, 'a');
    await redis.sadd(keys.unread, 'd');
    await redis.hset(keys.meta, 'tm', ms, 'ts', 4, 'n', 3, 'hm', ms - 10);
    expect(await cache(keys.meta)).toBeUndefined();

    const next = await inbox.append(notification(user, 'e'), { nowMs: ms + 10 });
    expect(next.outcome === 'appended' && offsetSeq(next.offset)).toBe(5);
    const stream = (await redis.xrange(keys.stream, '-', '+')) as [string, string[]][];
    expect(stream.map(([offset]) => offsetSeq(offset))).toEqual([3, 4, 5]);
    // Its fields are gone, the cache trusted again.
    expect(await redis.hmget(keys.meta, 'tm', 'ts', 'hm', 'xa')).toEqual([null, null, null, null]);
    expect(await cache(keys.meta)).toMatchObject({ tm: ms + 10, ts: 5, n: 3 });
  });

  it('gives stream, meta and unread set an expiry between retention and retention + 1 % after the last append, sent only when due', async () => {
    // Retention 200 s (maxAgeMs + recordGraceMs): the three keys expire 200–202 s after the last append.
    const inbox = new Inbox(redis, {
      prefix: `${randomId('expiry')}:`,
      maxAgeMs: 100_000,
      recordGraceMs: 100_000,
    });
    const user = randomId('u');
    const keys = inbox.keys(user);
    const three = [keys.stream, keys.meta, keys.unread];
    const ttls = async () => Promise.all(three.map((key) => redis.pttl(key)));
    const t0 = Date.now();
    await inbox.append(notification(user, 'a'), { nowMs: t0 });
    for (const ttl of await ttls()) {
      expect(ttl).toBeGreaterThan(200_000 - 5_000);
      expect(ttl).toBeLessThanOrEqual(202_000);
    }
    // Longer expiries set by hand show which appends send PEXPIRE (they would bring them back to ~202 s).
    const mark = async () => Promise.all(three.map((key) => redis.pexpire(key, 500_000)));
    await mark();
    // 1 s later: still at least 200 s away (202 - 1), nothing sent.
    await inbox.append(notification(user, 'b'), { nowMs: t0 + 1_000 });
    for (const ttl of await ttls()) expect(ttl).toBeGreaterThan(400_000);
    // 2.5 s after the first: less than 200 s away, all three renewed.
    await inbox.append(notification(user, 'c'), { nowMs: t0 + 2_500 });
    for (const ttl of await ttls()) expect(ttl).toBeLessThanOrEqual(202_000);
    await mark();
    // All read: read-3.lua deletes the unread set; the next append makes it again, and renews all three.
    await inbox.markRead(user, { all: true });
    expect(await redis.exists(keys.unread)).toBe(0);
    await inbox.append(notification(user, 'd'), { nowMs: t0 + 2_600 });
    for (const ttl of await ttls()) {
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(202_000);
    }
    expect(await inbox.unread(user)).toMatchObject({ count: 1 });
  });
});
