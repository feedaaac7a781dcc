import { randomUUID } from 'node:crypto';
import { DEFAULT_TENANT, isTenantId } from '@herald/protocol';
import calculateSlot from 'cluster-key-slot';
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
  /**
   * Hash of one notification: state, offset, delivered, …; also the idempotency marker. `<base>n:<id>`,
   * or, for an id routed to this user's slot ({@link notificationIdFor}), `<prefix>n:{<slot tag>}:<id>`
   * (found from the id alone, so no id index is written; it holds `user`, the owner).
   */
  marker(notificationId: string): string;
  /** Whether `notificationId` is routed to this user's slot: its marker is keyed by id, and names them. */
  routes(notificationId: string): boolean;
  /**
   * The marker of `notificationId` under this user's keys (`<base>n:<id>`), whatever the id: where a
   * worker from before routed ids stored a routed one, read when {@link InboxKeys.marker} has none.
   */
  legacyMarker(notificationId: string): string;
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
  const stream = `${base}s`;
  // The inbox's slot, computed when an id is first asked about.
  let slot: number | undefined;
  const routes = (notificationId: string): number | undefined => {
    const routed = routedSlot(notificationId);
    if (routed === undefined) return undefined;
    slot ??= calculateSlot(stream);
    return routed === slot ? routed : undefined;
  };
  return {
    stream,
    meta: `${base}m`,
    unread: `${base}u`,
    marker(notificationId) {
      const routed = routes(notificationId);
      return routed === undefined
        ? `${base}n:${notificationId}`
        : routedMarkerKeyOf(prefix, routed, notificationId);
    },
    routes: (notificationId) => routes(notificationId) !== undefined,
    legacyMarker: (notificationId) => `${base}n:${notificationId}`,
    dedupe: (dedupeKey) => `${base}d:${dedupeKey}`,
    mutes: `${base}p`,
  };
}

/** Redis Cluster's hash slots. */
const SLOTS = 16_384;
/** Each slot's hash tag: see {@link slotTag}. */
let slotTags: string[] | undefined;

/**
 * A hash tag in `slot`: the first base-36 number, counting from 0, that Redis hashes there (all 16,384
 * are found among the first ~200,000; the table is built once, on first use, in ~50 ms). Part of the
 * key layout: routed markers are found by it, so the rule never changes.
 */
export function slotTag(slot: number): string {
  if (slotTags === undefined) {
    const tags = new Array<string>(SLOTS);
    let found = 0;
    for (let i = 0; found < SLOTS; i++) {
      const tag = i.toString(36);
      const at = calculateSlot(tag);
      if (tags[at] === undefined) {
        tags[at] = tag;
        found++;
      }
    }
    slotTags = tags;
  }
  return slotTags[slot] ?? '';
}

/**
 * A routed notification id: UUID version 8 (RFC 9562's custom layout) whose 14 bits after the version
 * nibble (3 hex digits, then 2 bits of the variant digit) are the Redis Cluster slot of its user's inbox,
 * and whose last 4 hex digits are a check (the slot of the first 28 hex digits), so that an id written
 * before (a random version 4 one, a derived one) is taken for routed about once in 4 million, and then
 * only with its user's slot in those 14 bits. The other 92 bits are random (or derived).
 */
const ROUTED_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** The 4 hex digits that end a routed id whose first 28 hex digits are `head`. */
function routeCheck(head: string): string {
  return calculateSlot(head).toString(16).padStart(4, '0');
}

/** The slot a routed id names, or undefined for any other id (see {@link notificationIdFor}). */
export function routedSlot(id: string): number | undefined {
  if (id.length !== 36 || id.charCodeAt(14) !== 56 /* '8' */ || !ROUTED_ID.test(id)) return undefined;
  const hex = id.slice(0, 8) + id.slice(9, 13) + id.slice(14, 18) + id.slice(19, 23) + id.slice(24);
  if (routeCheck(hex.slice(0, 28)) !== hex.slice(28)) return undefined;
  return (Number.parseInt(hex.slice(13, 16), 16) << 2) | (Number.parseInt(hex[16] ?? '0', 16) & 3);
}

/**
 * A notification id for `userId` (any tenant: a user's slot depends on the user id alone), routed to the
 * slot of their inbox: its marker is then found from the id alone ({@link routedMarkerKey}), in that
 * slot, so the worker writes no id → user index for it (one key less per notification: the inbox append
 * takes 0.81–0.89× the Redis time, bench:inbox-append with BENCH_ROUTED=1). From `seed` (at least 32 hex digits, such as a SHA-256 of an
 * Idempotency-Key) the same id every time; else random.
 *
 * @example
 * ```ts
 * notificationIdFor('alice'); // '3f1c9a2e-7b4d-8xxx-…' (routedSlot(id) === alice's slot)
 * ```
 */
export function notificationIdFor(userId: string, seed?: string): string {
  const slot = calculateSlot(`{${escapeTag(userId)}}`);
  // Digits 12 and 16 of a random UUID (its version and variant) are not taken.
  const bits = seed ?? randomUUID().replaceAll('-', '');
  const head =
    bits.slice(0, 12) +
    '8' +
    (slot >> 2).toString(16).padStart(3, '0') +
    (8 | (slot & 3)).toString(16) +
    bits.slice(17, 28);
  const hex = head + routeCheck(head);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/**
 * An id that is never routed (a topic send's: one id, many users): `id` itself unless it reads as a
 * routed one, which a derived id does about once in 4 million; then its version digit is changed.
 */
export function unroutedId(id: string): string {
  return routedSlot(id) === undefined ? id : `${id.slice(0, 14)}0${id.slice(15)}`;
}

function routedMarkerKeyOf(prefix: string, slot: number, id: string): string {
  return `${prefix}n:{${slotTag(slot)}}:${id}`;
}

/**
 * Where the marker of routed notification `id` is under `prefix` (a tenant's base), or undefined when the
 * id is not routed (its marker is found through {@link notificationIndexKey}).
 *
 * @example
 * ```ts
 * routedMarkerKey('herald:inbox:', notificationIdFor('alice')); // 'herald:inbox:n:{<tag>}:<id>'
 * ```
 */
export function routedMarkerKey(prefix: string, id: string): string | undefined {
  const slot = routedSlot(id);
  return slot === undefined ? undefined : routedMarkerKeyOf(prefix, slot, id);
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
