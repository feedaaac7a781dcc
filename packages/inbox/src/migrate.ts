import { DEFAULT_TENANT } from '@herald/protocol';
import { Cluster, type Redis } from 'ioredis';
import { InboxError, InboxErrorCode } from './errors.js';
import { assertPrefix, escapeTag, tenantPrefix } from './keys.js';
import { defineScripts } from './scripts.js';

/** A user of the layout from before tenants whom {@link migrateToTenant} kept where they were, whole. */
export interface KeptUser {
  userId: string;
  /** Their keys left in the old layout: their inbox's, and the id index keys of their notifications. */
  keys: number;
  /**
   * When the tenant's layout was found to hold keys of theirs: `before` the run (the tenant's workers or
   * API stored, cancelled or muted something for them before the migration), or `during` it (the
   * tenant's workers were running).
   */
  found: 'before' | 'during';
  /** How many keys of theirs the tenant's layout holds (`during`: of the names the run looked at). */
  existing: number;
  /** Up to 3 of those names (the stream first when it is one), to show the operator. */
  examples: string[];
}

/** What {@link migrateToTenant} did, or (dry run) would do. */
export interface MigrationReport {
  /** A dry run: nothing was changed, and the figures say what a run would do now. */
  dryRun: boolean;
  /** Keys renamed into the tenant's layout (or that would be), id index keys included. */
  moved: number;
  /** Users whose keys were moved (or would be), each whole. */
  movedUsers: number;
  /**
   * Users kept where they were, whole, because the tenant's layout already holds keys of theirs; by user
   * id. Nothing of theirs moved: they stay tenant `default`'s (their inbox, statuses and id index keys).
   */
  kept: KeptUser[];
  /**
   * Keys left in place although their user's other keys moved, because their name in the tenant's layout
   * was taken in the meantime (the tenant's workers wrote for that user while the migration ran, or
   * since an interrupted run). Empty when the migration runs before the new workers start, as it should.
   */
  conflicts: string[];
}

/**
 * The per-user names in a user's layout that carry no id (`inboxKeys`: stream, meta, unread, mutes; and
 * `@herald/push`'s subscriptions): what the first move of a user checks in the tenant's layout besides
 * the names it moves.
 */
const USER_KEYS = ['s', 'm', 'u', 'p', 'push:subs', 'push:order'];

/**
 * The set of users (escaped hash tags) whose move a run of {@link migrateToTenant} to `tenantId` has
 * begun; deleted when a run ends. A run that was interrupted left it: the next run finishes moving those
 * users rather than keeping them (their keys in the tenant's layout are the migration's own).
 *
 * @example
 * ```ts
 * migrationJournalKey('herald:inbox:', 'acme'); // 'herald:inbox:migrating:acme'
 * ```
 */
export function migrationJournalKey(prefix: string, tenantId: string): string {
  assertPrefix(prefix);
  tenantPrefix(prefix, tenantId);
  return `${prefix}migrating:${tenantId}`;
}

/**
 * Moves the inboxes written before tenants existed (the layout tenant `default` still reads:
 * `<prefix>{<user>}:…` and `<prefix>id:{<id>}`) into `tenantId`'s layout (`<prefix>t:<tenant>:…`), for a
 * deployment whose one tenant was not `default` (its API keys were created with `--tenant acme`). It
 * moves every user of the old layout, so it is for a deployment coming from before tenants only: on one
 * where tenant `default` is in use it would hand `default`'s users to `tenantId`.
 *
 * Decided per user, never per key: a user any of whose keys already exists in the tenant's layout (their
 * stream, meta, unread set, a notification's record `n:<id>` or, for a routed id, `n:{<slot tag>}:<id>`
 * naming them, a dedupe key, mutes, push subscriptions:
 * the tenant's workers or API wrote for them before the migration ran) is kept where they were, whole,
 * and listed in {@link MigrationReport.kept}: their inbox, statuses and id index keys stay tenant
 * `default`'s. Every other user is moved whole, with the id index keys of their notifications (an index
 * key follows its user: `<prefix>id:{<id>}` → user) and the records of their routed ids. Each key is renamed (RENAMENX, in one script per
 * user and batch; its hash tag is kept, so it stays in its slot on Redis Cluster): nothing is copied,
 * TTLs are kept, nothing is lost. Running it again moves nothing more and keeps the same users; a run
 * that was interrupted is finished by the next ({@link migrationJournalKey}). Run it before the upgraded
 * workers start: a user who receives a notification meanwhile is kept (or, once their move began, has
 * keys in {@link MigrationReport.conflicts}).
 *
 * `dryRun`: changes nothing, and reports what a run would move and keep now. `batch` (default 1000): the
 * keys handled in one step (one script per user and step); the keyspace is walked 1,000 keys per SCAN
 * whatever it is. Memory: the users found in the tenant's layout and the users moved (one entry each),
 * never a user's keys.
 *
 * @throws {InboxError} `HERALD_ERR_INBOX_INVALID_ARGUMENT` for tenant `default`, an invalid tenant id or
 *   prefix, a batch that is not a whole number >= 1.
 * @example
 * ```ts
 * const plan = await migrateToTenant(redis, { prefix: 'herald:inbox:', tenantId: 'acme', dryRun: true });
 * const { moved, kept } = await migrateToTenant(redis, { prefix: 'herald:inbox:', tenantId: 'acme' });
 * ```
 */
export async function migrateToTenant(
  redis: Redis | Cluster,
  options: { prefix: string; tenantId: string; batch?: number; dryRun?: boolean },
): Promise<MigrationReport> {
  const { prefix, tenantId } = options;
  assertPrefix(prefix);
  if (tenantId === DEFAULT_TENANT) {
    throw new InboxError(
      InboxErrorCode.INVALID_ARGUMENT,
      `Tenant "${DEFAULT_TENANT}" already reads the layout from before tenants: nothing to migrate.`,
    );
  }
  const target = tenantPrefix(prefix, tenantId);
  const journal = migrationJournalKey(prefix, tenantId);
  const dryRun = options.dryRun === true;
  const batch = options.batch ?? 1000;
  if (!Number.isSafeInteger(batch) || batch < 1) {
    throw new InboxError(
      InboxErrorCode.INVALID_ARGUMENT,
      `batch must be a whole number of keys >= 1, got ${batch}.`,
    );
  }
  // A Cluster client knows its masters once it has read the slot table.
  if (redis instanceof Cluster && redis.status !== 'ready') await redis.ping();
  const nodes = redis instanceof Cluster ? redis.nodes('master') : [redis];
  const report: MigrationReport = { dryRun, moved: 0, movedUsers: 0, kept: [], conflicts: [] };

  // 1. The users the tenant's layout has already, but those an interrupted run had begun to move.
  const present = new Map<string, { count: number; examples: string[] }>();
  await scanAll(nodes, `${globEscape(target)}{*`, batch, (keys) => {
    for (const key of keys) {
      const parsed = parseUserKey(key, target);
      if (parsed === undefined) continue;
      let seen = present.get(parsed.tag);
      if (seen === undefined) {
        seen = { count: 0, examples: [] };
        present.set(parsed.tag, seen);
      }
      seen.count++;
      if (parsed.rest === 's') seen.examples.unshift(key);
      else if (seen.examples.length < 3) seen.examples.push(key);
      seen.examples.length = Math.min(seen.examples.length, 3);
    }
  });
  // A routed notification's marker (`n:{<slot tag>}:<id>`, see keys.ts) names its user: theirs too.
  await scanAll(nodes, `${globEscape(target)}n:{*`, batch, async (keys) => {
    const owners = await Promise.all(keys.map((key) => redis.hget(key, 'user')));
    keys.forEach((key, i) => {
      const owner = owners[i];
      if (owner === null || owner === undefined) return;
      const tag = escapeTag(owner);
      const seen = present.get(tag) ?? { count: 0, examples: [] };
      present.set(tag, seen);
      seen.count++;
      if (seen.examples.length < 3) seen.examples.push(key);
    });
  });
  const resumed = new Set<string>();
  if (present.size > 0 && (await redis.exists(journal)) === 1) {
    const tags = [...present.keys()];
    for (let i = 0; i < tags.length; i += 1000) {
      const chunk = tags.slice(i, i + 1000);
      const begun = await redis.smismember(journal, ...chunk);
      chunk.forEach((tag, j) => {
        if (begun[j] !== 1) return;
        resumed.add(tag);
        present.delete(tag);
      });
    }
  }

  const kept = new Map<string, KeptUser>();
  const keep = (tag: string, found: KeptUser['found'], seen: { count: number; examples: string[] }) => {
    const examples = seen.examples.slice(0, 3);
    const user: KeptUser = { userId: unescapeTag(tag), keys: 0, found, existing: seen.count, examples };
    kept.set(tag, user);
    return user;
  };

  // 2. Every user's keys, a batch at a time: a user found in step 1 stays, whole; the others move, whole.
  const moving = new Set<string>();
  const migrate = defineScripts(redis).migrate;
  await scanAll(nodes, `${globEscape(prefix)}{*`, batch, async (keys) => {
    const groups = new Map<string, string[]>();
    for (const key of keys) {
      const parsed = parseUserKey(key, prefix);
      if (parsed === undefined) continue;
      const group = groups.get(parsed.tag);
      if (group === undefined) groups.set(parsed.tag, [key]);
      else group.push(key);
    }
    const moves: { tag: string; group: string[]; first: boolean }[] = [];
    for (const [tag, group] of groups) {
      const seen = present.get(tag);
      const stays = kept.get(tag) ?? (seen === undefined ? undefined : keep(tag, 'before', seen));
      if (stays !== undefined) {
        stays.keys += group.length;
      } else if (dryRun) {
        report.moved += group.length;
        moving.add(tag);
      } else {
        moves.push({ tag, group, first: !moving.has(tag) && !resumed.has(tag) });
      }
    }
    // Recorded before anything of theirs moves: a run interrupted from here on is finished by the next.
    const begun = moves.filter((move) => move.first).map((move) => move.tag);
    if (begun.length > 0) await redis.sadd(journal, ...begun);
    await Promise.all(
      moves.map(async ({ tag, group, first }) => {
        const renamed = group.map((key) => target + key.slice(prefix.length));
        const names = new Set(renamed);
        const checks = first
          ? USER_KEYS.map((name) => `${target}{${tag}}:${name}`).filter((name) => !names.has(name))
          : [];
        const [done, moved, ...found] = (await migrate(
          2 * group.length + checks.length,
          ...group,
          ...renamed,
          ...checks,
          group.length,
          first ? 'first' : 'more',
        )) as [number, number, ...string[]];
        if (done === 0) {
          // The tenant wrote for this user since step 1: kept whole all the same.
          await redis.srem(journal, tag);
          keep(tag, 'during', { count: found.length, examples: found }).keys += group.length;
          return;
        }
        moving.add(tag);
        report.moved += moved;
        report.conflicts.push(...found);
      }),
    );
  });

  // 3. The id index (`<prefix>id:{<id>}` → user) and the markers of routed ids (`<prefix>n:{<slot tag>}:<id>`,
  // whose `user` says whose): each key follows its user, moved unless they were kept.
  const follow = async (glob: string, ownerOf: (key: string) => Promise<string | null>) =>
    scanAll(nodes, glob, batch, async (keys) => {
      const users = await Promise.all(keys.map(ownerOf));
      await Promise.all(
        keys.map(async (key, i) => {
          const userId = users[i];
          if (userId === null || userId === undefined) return; // expired meanwhile
          const stays = kept.get(escapeTag(userId));
          if (stays !== undefined) {
            stays.keys++;
            return;
          }
          // A user of whom only such keys are left (a cancelled routed notification) counts as moved too.
          if (dryRun) {
            report.moved++;
            moving.add(escapeTag(userId));
            return;
          }
          try {
            if ((await redis.renamenx(key, target + key.slice(prefix.length))) === 1) {
              report.moved++;
              moving.add(escapeTag(userId));
            } else report.conflicts.push(key);
          } catch (error) {
            // Expired since the read: nothing to move.
            if (!/no such key/i.test((error as Error).message)) throw error;
          }
        }),
      );
    });
  await follow(`${globEscape(prefix)}id:{*`, (key) => redis.get(key));
  await follow(`${globEscape(prefix)}n:{*`, (key) => redis.hget(key, 'user'));

  if (!dryRun) await redis.del(journal);
  report.movedUsers = moving.size;
  report.kept = [...kept.values()].sort((a, b) => (a.userId < b.userId ? -1 : a.userId > b.userId ? 1 : 0));
  return report;
}

/**
 * SCAN's COUNT: how much of the keyspace one SCAN walks. At least this much whatever the batch, so that a
 * walk costs about (keys in Redis) / 1,000 round trips: most of a production Redis is other keys.
 */
const SCAN_COUNT = 1000;

/**
 * SCANs every node for `match`, handing what it finds to `each` `batch` keys at a time (each awaited
 * before the next).
 */
async function scanAll(
  nodes: Redis[],
  match: string,
  batch: number,
  each: (keys: string[]) => void | Promise<void>,
): Promise<void> {
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', match, 'COUNT', Math.max(batch, SCAN_COUNT));
      cursor = next;
      for (let i = 0; i < keys.length; i += batch) await each(keys.slice(i, i + batch));
    } while (cursor !== '0');
  }
}

/** `<base>{<tag>}:<rest>` as its tag and rest; undefined for a key of another shape. */
function parseUserKey(key: string, base: string): { tag: string; rest: string } | undefined {
  if (!key.startsWith(`${base}{`)) return undefined;
  const close = key.indexOf('}', base.length);
  if (close <= base.length + 1) return undefined;
  return { tag: key.slice(base.length + 1, close), rest: key.slice(close + 2) };
}

/** The user id of an escaped hash tag (`escapeTag` backwards: it is injective). */
function unescapeTag(tag: string): string {
  if (tag === '%') return '';
  return tag.replace(/%(25|7B|7D)/g, (_, code: string) => (code === '25' ? '%' : code === '7B' ? '{' : '}'));
}

/** Glob characters of SCAN's MATCH, escaped so that a prefix is matched literally. */
function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, (char) => `\\${char}`);
}
