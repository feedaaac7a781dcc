import { DEFAULT_TENANT, isTenantId } from '@herald/protocol';
import { InboxError, InboxErrorCode, shown } from './errors.js';

/**
 * Escapes a user id for use inside a Redis Cluster hash tag: `%` → `%25`, `{` → `%7B`, `}` → `%7D`, and
 * the empty string → `%` (an empty tag `{}` would make Redis hash the whole key). Injective: two ids never
 * give one escaped string. Plain ids stay as they are.
 *
 * @example
 * ```ts
 * escapeTag('user-42'); // 'user-42'
 * escapeTag('a{b}');    // 'a%7Bb%7D'
 * ```
 */
export function escapeTag(id: string): string {
  if (id === '') return '%';
  if (!/[%{}]/.test(id)) return id;
  return id.replace(/[%{}]/g, (char) => (char === '%' ? '%25' : char === '{' ? '%7B' : '%7D'));
}

/**
 * Every Redis key of one user's inbox. They share the hash tag `{<escaped userId>}`, so one Lua script can
 * touch them all on Redis Cluster.
 *
 * @example
 * ```ts
 * const keys = inboxKeys('herald:inbox:', 'alice');
 * keys.stream;          // 'herald:inbox:{alice}:s'
 * keys.marker('n-1');   // 'herald:inbox:{alice}:n:n-1'
 * ```
 */
export interface InboxKeys {
  /** The stream of notifications. */
  stream: string;
  /**
   * Hash: `uv`, the unread version; and what `append-n.lua` keeps of the stream so as not to read it on
   * every append: `tm`/`ts` the top offset's ms and seq, `n` the length, `hm` at most the head's ms.
   * Those are trusted only while `n` equals the stream's length (else read from the stream again).
   */
  meta: string;
  /** Set of unread notification ids. */
  unread: string;
  /** Hash of one notification: state, offset, delivered, …; also the idempotency marker. */
  marker(notificationId: string): string;
  /** String: the first notification id seen with `dedupeKey`. */
  dedupe(dedupeKey: string): string;
  /**
   * Set of the user's mutes (`topic:<name>`, `type:<name>`), read by the append script: in the inbox's
   * slot, so that muting costs no extra round trip per notification. No TTL: kept until unmuted.
   */
  mutes: string;
}

/** @see InboxKeys */
export function inboxKeys(prefix: string, userId: string): InboxKeys {
  const base = `${prefix}{${escapeTag(userId)}}:`;
  return {
    stream: `${base}s`,
    meta: `${base}m`,
    unread: `${base}u`,
    marker: (notificationId) => `${base}n:${notificationId}`,
    dedupe: (dedupeKey) => `${base}d:${dedupeKey}`,
    mutes: `${base}p`,
  };
}

/**
 * The key that maps a notification id to its user (`<prefix>id:{<escaped id>}`), so that a status can be
 * looked up by id alone. Its own hash tag: it is written beside, not inside, the user's inbox script.
 *
 * @example
 * ```ts
 * notificationIndexKey('herald:inbox:', 'n-1'); // 'herald:inbox:id:{n-1}'
 * ```
 */
export function notificationIndexKey(prefix: string, notificationId: string): string {
  return `${prefix}id:{${escapeTag(notificationId)}}`;
}

/**
 * The key prefix of one tenant's inboxes under `prefix`. The tenant `default` keeps the layout of the
 * time before tenants (`<prefix>{<user>}:…`), so that a deployment upgraded from one tenant keeps its
 * inboxes with no migration; any other tenant lives under `<prefix>t:<tenantId>:` (`<prefix>t:acme:{<user>}:…`).
 * No two tenants' keys meet: a default key has `{` right after the prefix, a tenant key `t:`, and a
 * tenant id has neither `:` nor braces (`isTenantId`).
 *
 * @example
 * ```ts
 * tenantPrefix('herald:inbox:', 'default'); // 'herald:inbox:'
 * tenantPrefix('herald:inbox:', 'acme');    // 'herald:inbox:t:acme:'
 * ```
 */
export function tenantPrefix(prefix: string, tenantId: string): string {
  if (tenantId === DEFAULT_TENANT) return prefix;
  if (!isTenantId(tenantId)) {
    throw new InboxError(
      InboxErrorCode.INVALID_ARGUMENT,
      `${shown(tenantId)} is not a tenant id: 1 to 64 of A-Z a-z 0-9 _ . -`,
    );
  }
  return `${prefix}t:${tenantId}:`;
}

/**
 * The key layout of a store acting for one tenant: its prefix (checked), its tenant (default
 * `default`) and where that tenant's keys live ({@link tenantPrefix}).
 *
 * @example
 * ```ts
 * tenantLayout({ prefix: 'herald:inbox:', tenantId: 'acme' }).base; // 'herald:inbox:t:acme:'
 * ```
 */
export function tenantLayout(
  options: { prefix?: string | undefined; tenantId?: string | undefined },
  defaultPrefix: string,
): { prefix: string; tenantId: string; base: string } {
  const prefix = options.prefix ?? defaultPrefix;
  assertPrefix(prefix);
  const tenantId = options.tenantId ?? DEFAULT_TENANT;
  return { prefix, tenantId, base: tenantPrefix(prefix, tenantId) };
}

/**
 * Refuses a key prefix that would break the hash tag (a brace would become the tag).
 *
 * @throws {InboxError} `HERALD_ERR_INBOX_INVALID_ARGUMENT`
 * @example
 * ```ts
 * assertPrefix('herald:inbox:'); // ok
 * ```
 */
export function assertPrefix(prefix: string): void {
  if (/[{}]/.test(prefix)) {
    throw new InboxError(
      InboxErrorCode.INVALID_ARGUMENT,
      `Inbox key prefix "${prefix}" contains a brace: remove it (the user id is the hash tag).`,
    );
  }
}
