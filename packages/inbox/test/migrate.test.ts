import { keysMatching, randomId, startRedisServer, testRedis } from '@herald/testing';
import { type Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  escapeTag,
  Inbox,
  type MigrationReport,
  migrateToTenant,
  migrationJournalKey,
  notificationIdFor,
  Preferences,
} from '../src/index.js';
import { defineScripts } from '../src/scripts.js';

describe('migrateToTenant: the inboxes written before tenants, to one tenant, user by user', () => {
  let redis: Redis | Cluster;
  const prefixes: string[] = [];
  beforeAll(() => {
    redis = testRedis();
  });
  afterAll(async () => {
    for (const prefix of prefixes) {
      const keys = await keysMatching(redis, `${prefix}*`);
      await Promise.all(keys.map((key) => redis.unlink(key)));
    }
    redis.disconnect();
  });

  /** A random inbox prefix; its inboxes of before tenants (read today as tenant `default`'s) and tenant acme's. */
  function setup() {
    const prefix = `${randomId('migrate')}:`;
    prefixes.push(prefix);
    const legacy = new Inbox(redis, { prefix });
    return {
      prefix,
      legacy,
      acme: legacy.tenant('acme'),
      legacyMutes: new Preferences(redis, { prefix }),
      acmeMutes: new Preferences(redis, { prefix, tenantId: 'acme' }),
      /** Every key of `userId` in the old layout, or in acme's. */
      keysOf: async (userId: string, layout: 'old' | 'acme') =>
        (
          await keysMatching(
            redis,
            `${prefix}${layout === 'acme' ? 't:acme:' : ''}{${globEscape(escapeTag(userId))}}*`,
          )
        ).sort(),
    };
  }

  /**
   * Writes what a worker, a realtime server and the gateway of before tenants left for `userId`: three
   * notifications (the second with a dedupe key), the first acked (delivered) and read, and a mute.
   */
  async function writeLegacy(env: ReturnType<typeof setup>, userId: string) {
    const ids = [randomId('n'), randomId('n'), randomId('n')];
    const offsets: string[] = [];
    for (const [n, id] of ids.entries()) {
      const result = await env.legacy.append(
        { id, userId, payload: { n }, createdAt: new Date().toISOString() },
        n === 1 ? { dedupeKey: 'welcome' } : {},
      );
      if (result.outcome !== 'appended') throw new Error(result.outcome);
      offsets.push(result.offset);
    }
    expect(await env.legacy.ack(userId, [ids[0] as string], 'realtime-old')).toBe(1);
    await env.legacy.markRead(userId, { ids: [ids[0] as string] });
    await env.legacyMutes.mute(userId, { topics: ['marketing'] });
    return { ids, offsets };
  }

  /** What a user's inbox, unread count, statuses and mutes read as, for one tenant's view. */
  async function view(inbox: Inbox, preferences: Preferences, userId: string, ids: string[]) {
    const listing = await inbox.list(userId);
    return {
      items: listing.items.map((item) => ({
        id: item.id,
        offset: item.offset,
        read: item.read,
        delivered: item.deliveredAt !== null,
      })),
      unread: listing.unread.count,
      statuses: await Promise.all(
        ids.map(async (id) => {
          const status = await inbox.statusById(id);
          return status && { userId: status.userId, state: status.state, delivered: status.delivered };
        }),
      ),
      mutes: (await preferences.get(userId)).topics,
    };
  }

  it('keeps a user any of whose keys is already in the tenant’s layout whole in place (none of their keys moved), and moves the others whole (offsets, read marks, statuses, mutes, dedupe keys)', async () => {
    const env = setup();
    const alice = randomId('alice');
    const bob = randomId('bob');
    const carol = `${randomId('org')}/{carol}`; // a user id that is escaped in its hash tag
    const dave = randomId('dave');
    const legacy = {
      alice: await writeLegacy(env, alice),
      bob: await writeLegacy(env, bob),
      carol: await writeLegacy(env, carol),
      dave: await writeLegacy(env, dave),
    };
    // Before the migration ran, tenant acme's workers stored a notification for alice (her stream, meta,
    // unread set, a marker and an id index key in acme's layout), and acme cancelled one for dave (a
    // marker alone: any key of a user counts, not only the stream).
    const fresh = randomId('n');
    expect(
      (await env.acme.append({ id: fresh, userId: alice, payload: {}, createdAt: new Date().toISOString() }))
        .outcome,
    ).toBe('appended');
    expect((await env.acme.cancel(dave, randomId('n'))).state).toBe('cancelled');
    // A routed id (keys.ts) of frank's in the old layout (a default-tenant deployment of today), and one
    // acme cancelled for erin (her only key in acme's layout: the record of a routed id, naming her).
    const frank = randomId('frank');
    const routed = notificationIdFor(frank);
    await env.legacy.append({ id: routed, userId: frank, payload: {}, createdAt: new Date().toISOString() });
    const frankOld = await env.keysOf(frank, 'old');
    // gina: only a routed notification cancelled before it was stored (its records, nothing else).
    const gina = randomId('gina');
    const ginasId = notificationIdFor(gina);
    await env.legacy.cancel(gina, ginasId);
    const erin = randomId('erin');
    await writeLegacy(env, erin);
    const erinsId = notificationIdFor(erin);
    expect((await env.acme.cancel(erin, erinsId)).state).toBe('cancelled');
    // A cancel writes the record under her keys too (for workers from before routed ids): without it,
    // what an upgraded worker leaves.
    await redis.del(env.acme.keys(erin).legacyMarker(erinsId));
    const erinOld = await env.keysOf(erin, 'old');
    const before = {
      alice: await view(env.legacy, env.legacyMutes, alice, legacy.alice.ids),
      bob: await view(env.legacy, env.legacyMutes, bob, legacy.bob.ids),
      carol: await view(env.legacy, env.legacyMutes, carol, legacy.carol.ids),
      dave: await view(env.legacy, env.legacyMutes, dave, legacy.dave.ids),
      aliceOld: await env.keysOf(alice, 'old'),
      aliceAcme: await env.keysOf(alice, 'acme'),
      daveOld: await env.keysOf(dave, 'old'),
      daveAcme: await env.keysOf(dave, 'acme'),
    };
    expect(before.bob.items.map((item) => [item.read, item.delivered])).toEqual([
      [true, true],
      [false, false],
      [false, false],
    ]);

    const report = await migrateToTenant(redis, { prefix: env.prefix, tenantId: 'acme', batch: 7 });

    // alice and dave: kept whole, listed with why; not one of their keys moved, in either direction.
    expect(await env.keysOf(alice, 'old')).toEqual(before.aliceOld);
    expect(await env.keysOf(alice, 'acme')).toEqual(before.aliceAcme);
    expect(await env.keysOf(dave, 'old')).toEqual(before.daveOld);
    expect(await env.keysOf(dave, 'acme')).toEqual(before.daveAcme);
    expect(await view(env.legacy, env.legacyMutes, alice, legacy.alice.ids)).toEqual(before.alice);
    expect(await view(env.legacy, env.legacyMutes, dave, legacy.dave.ids)).toEqual(before.dave);
    for (const id of [...legacy.alice.ids, ...legacy.dave.ids]) {
      // Their statuses stay the default tenant's: acme does not see them (no cross-tenant leak).
      expect(await env.acme.statusById(id)).toBeUndefined();
    }
    expect((await env.acme.list(alice)).items.map((item) => item.id)).toEqual([fresh]);
    expect(await env.keysOf(erin, 'old')).toEqual(erinOld);
    expect(kept(report)).toEqual(
      [
        {
          userId: alice,
          keys: before.aliceOld.length + 3,
          found: 'before',
          existing: before.aliceAcme.length,
        },
        { userId: dave, keys: before.daveOld.length + 3, found: 'before', existing: before.daveAcme.length },
        { userId: erin, keys: erinOld.length + 3, found: 'before', existing: 1 },
      ].sort((a, b) => a.userId.localeCompare(b.userId)),
    );
    // frank's routed record moved with him.
    expect(await env.acme.statusById(routed)).toMatchObject({ userId: frank, state: 'inbox' });
    expect(await env.legacy.statusById(routed)).toBeUndefined();
    expect(await env.keysOf(frank, 'old')).toEqual([]);
    expect(report.kept.find((user) => user.userId === alice)?.examples).toContain(
      `${env.prefix}t:acme:{${alice}}:s`,
    );

    // bob and carol: moved whole, read exactly as before, now as acme's, and nothing of theirs is left.
    for (const [userId, written, was] of [
      [bob, legacy.bob, before.bob],
      [carol, legacy.carol, before.carol],
    ] as const) {
      expect(await env.keysOf(userId, 'old')).toEqual([]);
      expect(await view(env.acme, env.acmeMutes, userId, written.ids)).toEqual(was);
      expect(was.items.map((item) => item.offset)).toEqual(written.offsets);
      for (const id of written.ids) expect(await env.legacy.statusById(id)).toBeUndefined();
      // The dedupe key moved with them.
      const again = await env.acme.append(
        { id: randomId('n'), userId, payload: {}, createdAt: new Date().toISOString() },
        { dedupeKey: 'welcome' },
      );
      expect(again).toMatchObject({ outcome: 'deduplicated', duplicateOf: written.ids[1] });
    }
    expect(report).toMatchObject({ dryRun: false, movedUsers: 4, conflicts: [] });
    // bob's and carol's keys and id index keys; frank's keys and his routed record (no index key);
    // gina's two records of her cancelled notification (routed, and under her keys).
    expect(report.moved).toBe(2 * (before.aliceOld.length + 3) + frankOld.length + 1 + 2);
    expect(await env.acme.statusById(ginasId)).toMatchObject({ userId: gina, state: 'cancelled' });

    // Safe to run again: nothing more moves, the same users are kept.
    const again = await migrateToTenant(redis, { prefix: env.prefix, tenantId: 'acme' });
    expect(again).toMatchObject({ moved: 0, movedUsers: 0, conflicts: [] });
    expect(kept(again)).toEqual(kept(report));
  });

  it('a dry run changes nothing and reports what a run then does', async () => {
    const env = setup();
    const alice = randomId('alice');
    const bob = randomId('bob');
    await writeLegacy(env, alice);
    await writeLegacy(env, bob);
    await env.acme.append({
      id: randomId('n'),
      userId: alice,
      payload: {},
      createdAt: new Date().toISOString(),
    });
    const snapshot = async () => {
      const keys = (await keysMatching(redis, `${env.prefix}*`)).sort();
      return Promise.all(keys.map(async (key) => [key, (await redis.dumpBuffer(key))?.toString('hex')]));
    };
    const before = await snapshot();

    const dry = await migrateToTenant(redis, { prefix: env.prefix, tenantId: 'acme', dryRun: true });
    expect(await snapshot()).toEqual(before);
    expect(dry).toMatchObject({ dryRun: true, movedUsers: 1, conflicts: [] });
    expect(kept(dry).map((user) => user.userId)).toEqual([alice]);

    const done = await migrateToTenant(redis, { prefix: env.prefix, tenantId: 'acme' });
    expect({ moved: done.moved, movedUsers: done.movedUsers, kept: kept(done) }).toEqual({
      moved: dry.moved,
      movedUsers: dry.movedUsers,
      kept: kept(dry),
    });
    expect(await env.keysOf(bob, 'old')).toEqual([]);
  });

  it('an interrupted run, run again, finishes moving the users it had begun (they are not kept)', async () => {
    const env = setup();
    const bob = randomId('bob');
    const written = await writeLegacy(env, bob);
    const was = await view(env.legacy, env.legacyMutes, bob, written.ids);
    // What a run killed half-way through bob leaves: bob recorded as begun, some of his keys moved.
    const tag = `{${escapeTag(bob)}}`;
    await redis.sadd(migrationJournalKey(env.prefix, 'acme'), escapeTag(bob));
    for (const suffix of [':s', ':m']) {
      await redis.rename(`${env.prefix}${tag}${suffix}`, `${env.prefix}t:acme:${tag}${suffix}`);
    }

    const report = await migrateToTenant(redis, { prefix: env.prefix, tenantId: 'acme' });
    expect(report).toMatchObject({ kept: [], conflicts: [] });
    expect(await env.keysOf(bob, 'old')).toEqual([]);
    expect(await view(env.acme, env.acmeMutes, bob, written.ids)).toEqual(was);
    // Done: the record of the users begun is gone.
    expect(await redis.exists(migrationJournalKey(env.prefix, 'acme'))).toBe(0);
  });

  it('walks a large keyspace in a few SCANs whatever its batch: its time grows with the keys in Redis, not with keys / batch', async () => {
    // A Redis of its own: the count below is of this test's SCANs alone. The old layout's users sit
    // among 20,000 keys of other things, as in a production Redis (queues, limiter, other prefixes).
    const server = await startRedisServer();
    const own = new Redis(server.url);
    try {
      const pipeline = own.pipeline();
      for (let i = 0; i < 20_000; i += 500) {
        pipeline.mset(...Array.from({ length: 500 }, (_, j) => [`other:${i + j}`, 'x']).flat());
      }
      await pipeline.exec();
      const prefix = 'herald:inbox:';
      const legacy = new Inbox(own, { prefix });
      const users = ['alice', 'bob', 'carol'];
      const ids = new Map<string, string[]>();
      for (const userId of users) {
        ids.set(userId, []);
        for (let n = 0; n < 3; n++) {
          const id = randomId('n');
          await legacy.append({ id, userId, payload: { n }, createdAt: new Date().toISOString() });
          ids.get(userId)?.push(id);
        }
      }
      await own.config('RESETSTAT');

      // batch 7: a user's keys are moved in several steps (each user has more than 7 keys).
      const report = await migrateToTenant(own, { prefix, tenantId: 'acme', batch: 7 });

      const scans = Number(/cmdstat_scan:calls=(\d+)/.exec(await own.info('commandstats'))?.[1] ?? 0);
      // Three walks of the keyspace (the tenant's users, the old layout's, the id index), each about
      // 20,000 / 1,000 SCANs; one SCAN per 7 buckets was 20,000 / 7 per walk.
      expect(scans).toBeLessThan(3 * 40);
      expect(report).toMatchObject({ movedUsers: 3, kept: [], conflicts: [] });
      const acme = legacy.tenant('acme');
      for (const userId of users) {
        expect((await acme.list(userId)).items.map((item) => item.id)).toEqual(ids.get(userId));
        expect(await own.keys(`${prefix}{${userId}}*`)).toEqual([]);
      }
      expect(await own.dbsize()).toBeGreaterThanOrEqual(20_000);
    } finally {
      own.disconnect();
      await server.dispose();
    }
  });

  it('refuses a batch that is not a whole number >= 1, naming it', async () => {
    const { prefix } = setup();
    for (const batch of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      await expect(migrateToTenant(redis, { prefix, tenantId: 'acme', batch })).rejects.toMatchObject({
        code: 'HERALD_ERR_INBOX_INVALID_ARGUMENT',
        message: expect.stringContaining('batch'),
      });
    }
  });

  it('migrate-n.lua: a user’s first move stops whole when the tenant has any name of theirs; later moves skip taken names; TTLs are kept', async () => {
    const { prefix } = setup();
    const migrate = defineScripts(redis).migrate;
    const old = [`${prefix}{u}:n:1`, `${prefix}{u}:n:2`];
    const renamed = old.map((key) => key.replace(prefix, `${prefix}t:acme:`));
    await redis.set(old[0] as string, 'one', 'PX', 60_000);
    await redis.set(old[1] as string, 'two');
    // The tenant's workers stored something for u (its meta) after the run looked.
    await redis.hset(`${prefix}t:acme:{u}:m`, 'uv', '1');
    const checks = [`${prefix}t:acme:{u}:s`, `${prefix}t:acme:{u}:m`];
    expect(await migrate(6, ...old, ...renamed, ...checks, 2, 'first')).toEqual([
      0,
      0,
      `${prefix}t:acme:{u}:m`,
    ]);
    expect(await redis.exists(...old)).toBe(2);
    expect(await redis.exists(...renamed)).toBe(0);

    // Once a user's move is under way, each key moves unless its new name is taken (that key is answered).
    await redis.set(renamed[1] as string, 'theirs');
    expect(await migrate(4, ...old, ...renamed, 2, 'more')).toEqual([1, 1, old[1]]);
    expect(await redis.get(renamed[0] as string)).toBe('one');
    expect(await redis.pttl(renamed[0] as string)).toBeGreaterThan(0);
    expect(await redis.get(old[1] as string)).toBe('two');
    expect(await redis.get(renamed[1] as string)).toBe('theirs');
  });
});

/** The report's kept users without their example keys, by user id. */
function kept(report: MigrationReport) {
  return report.kept
    .map(({ userId, keys, found, existing }) => ({ userId, keys, found, existing }))
    .sort((a, b) => a.userId.localeCompare(b.userId));
}

function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, (char) => `\\${char}`);
}
