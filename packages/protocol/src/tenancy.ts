/**
 * Tenants: one Herald deployment serves several products (tenants), and a tenant is a hard wall. A
 * user is `(tenantId, userId)` everywhere: inbox keys, unread counts, dedupe keys, the recipient
 * bucket, connection slots, live channels and statuses. Every API key belongs to one tenant, and so
 * does every user token it mints.
 */

/** The tenant of the keys from `HERALD_API_KEYS`, and of everything written before tenants existed. */
export const DEFAULT_TENANT = 'default';

/** Characters a tenant id may contain: letters, digits, `_ . -`; 1 to 64 of them. */
export const TENANT_ID_PATTERN = '^[A-Za-z0-9_.-]{1,64}$';
const TENANT_ID = new RegExp(TENANT_ID_PATTERN);

/**
 * {@link TENANT_ID_PATTERN} without `.` and `..` alone (path segments, which HTTP clients resolve): what a
 * new tenant, and a tenant named in a URL, may be.
 */
export const NEW_TENANT_ID_PATTERN = '^(?!\\.\\.?$)[A-Za-z0-9_.-]{1,64}$';
const NEW_TENANT_ID = new RegExp(NEW_TENANT_ID_PATTERN);

/**
 * True when `value` is a valid tenant id.
 *
 * @example
 * ```ts
 * isTenantId('acme');     // true
 * isTenantId('acme/eu');  // false: `/` separates the tenant from the user in a user key
 * ```
 */
export function isTenantId(value: unknown): value is string {
  return typeof value === 'string' && TENANT_ID.test(value);
}

/**
 * True when `value` may name a new tenant: a tenant id ({@link isTenantId}) other than `.` and `..`,
 * which are path segments to every HTTP client (`/admin/tenants/../webhook` is `/admin/webhook`).
 * Tenants created before keep working: only their creation is refused.
 *
 * @example
 * ```ts
 * isNewTenantId('acme'); // true
 * isNewTenantId('..');   // false
 * ```
 */
export function isNewTenantId(value: unknown): value is string {
  return typeof value === 'string' && NEW_TENANT_ID.test(value);
}

/**
 * The one string that names a user of a tenant: `<tenantId>/<userId>`. Injective: a tenant id never
 * contains `/`, so the first `/` always ends it (user ids may contain `/`). Used for live channels, the
 * recipient bucket and connection slots.
 *
 * @example
 * ```ts
 * userKey('acme', 'alice');      // 'acme/alice'
 * userKey('default', 'org/bob'); // 'default/org/bob'
 * ```
 */
export function userKey(tenantId: string, userId: string): string {
  return `${tenantId}/${userId}`;
}

/**
 * The Redis set of revoked API key ids under the gateway's key prefix (`HERALD_KEY_PREFIX`): the
 * gateway adds to it on revoke, the realtime servers refuse (and disconnect) the tokens those keys minted.
 *
 * @example
 * ```ts
 * revokedApiKeysKey('herald:'); // 'herald:apikeys:revoked'
 * ```
 */
export function revokedApiKeysKey(keyPrefix: string): string {
  return `${keyPrefix}apikeys:revoked`;
}
