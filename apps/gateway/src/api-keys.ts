import crypto, { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { DEFAULT_TENANT, isNewTenantId, isTenantId, revokedApiKeysKey } from '@herald/protocol';
import type { Cluster, Redis } from 'ioredis';

/** Limits an API key may carry instead of the gateway's defaults. */
export interface KeyLimits {
  /** Per recipient `userId`. */
  recipientPerSecond?: number;
  recipientBurst?: number;
  /** Per API key (this sender). */
  senderPerSecond?: number;
  senderBurst?: number;
}

/**
 * Inbox bounds a key may carry, below the deployment's (`HERALD_INBOX_MAX_LENGTH`, `HERALD_INBOX_MAX_AGE_MS`):
 * its recipients' inboxes keep at most this many notifications, for at most this long (oldest trimmed).
 */
export interface KeyInboxBounds {
  maxLength?: number;
  maxAgeMs?: number;
}

/** What the gateway knows about the caller once its key is accepted. */
export interface ApiKeyIdentity {
  id: string;
  name: string;
  /** The key's tenant: everything the key does acts on this tenant's users only. */
  tenantId: string;
  limits: KeyLimits;
  inbox?: KeyInboxBounds;
}

/** An API key as stored (never the key itself: only its SHA-256). */
export interface ApiKeyRecord extends ApiKeyIdentity {
  createdAt: string;
  revokedAt?: string;
}

const LIMIT_FIELDS = ['recipientPerSecond', 'recipientBurst', 'senderPerSecond', 'senderBurst'] as const;
const INBOX_FIELDS = { maxLength: 'inboxMaxLength', maxAgeMs: 'inboxMaxAgeMs' } as const;

/**
 * The id of a `HERALD_API_KEYS` key: `env-` and the first 16 hex digits of SHA-256(`herald-api-key:` +
 * key). The same on every gateway whatever the key's place in the list; an operator computes it with
 * `printf 'herald-api-key:%s' "$KEY" | sha256sum | cut -c1-16`.
 */
export function envKeyId(key: string): string {
  return `env-${createHash('sha256').update(`herald-api-key:${key}`).digest('hex').slice(0, 16)}`;
}

/** SHA-256 of `value`: one-shot `crypto.hash` where Node has it (20.12+), about twice as fast. */
export const sha256Buffer: (value: string) => Buffer =
  typeof (crypto as { hash?: unknown }).hash === 'function'
    ? (value) => crypto.hash('sha256', value, 'buffer')
    : (value) => createHash('sha256').update(value).digest();

function sha256(value: string): string {
  return sha256Buffer(value).toString('hex');
}

/**
 * API keys stored hashed in Redis. A key is `hk_` + 32 random bytes (base64url); Redis holds only its
 * SHA-256, so a leaked database does not leak keys. Lookups are by digest, so no comparison of the
 * secret happens in Redis or here; keys from `HERALD_API_KEYS` are compared in constant time.
 *
 * Layout: `<prefix>apikey:{<sha256>}` hash (the key's record), `<prefix>apikeys` hash id → sha256.
 */
export class ApiKeyStore {
  readonly #redis: Redis | Cluster;
  readonly #prefix: string;
  readonly #cacheMs: number;
  readonly #cache = new Map<string, { identity: ApiKeyIdentity | undefined; until: number }>();
  readonly #envKeys: { digest: Buffer; identity: ApiKeyIdentity }[];
  /** Per connection (socket), the key it last presented and was accepted for, until the cache expires. */
  readonly #byConnection = new WeakMap<object, { key: Buffer; identity: ApiKeyIdentity; until: number }>();

  constructor(options: {
    redis: Redis | Cluster;
    keyPrefix: string;
    cacheMs: number;
    envKeys: readonly string[];
  }) {
    this.#redis = options.redis;
    this.#prefix = options.keyPrefix;
    this.#cacheMs = options.cacheMs;
    this.#envKeys = options.envKeys.map((key, index) => ({
      digest: sha256Buffer(key),
      identity: {
        // From the key itself, not its place in the list: during a rotation rolled out one gateway at a
        // time (OLD,NEW here, NEW alone there), NEW took OLD's id on one side, and with it OLD's
        // idempotency records and sender bucket. Domain-separated, and 64 bits only (it is in tokens).
        id: envKeyId(key),
        name: `HERALD_API_KEYS #${index + 1}`,
        tenantId: DEFAULT_TENANT,
        limits: {},
      },
    }));
  }

  #recordKey(digest: string): string {
    return `${this.#prefix}apikey:{${digest}}`;
  }

  #indexKey(): string {
    return `${this.#prefix}apikeys`;
  }

  /**
   * The identity behind `presented`, or undefined when it is unknown or revoked. A Redis answer is
   * trusted for `cacheMs` (≤ 1 s), which bounds how long a revoked key keeps working on any gateway.
   */
  authenticate(
    presented: string,
    connection?: object,
  ): ApiKeyIdentity | undefined | Promise<ApiKeyIdentity | undefined> {
    const now = Date.now();
    // The same key again on the same connection (keep-alive: the common case): compared in constant
    // time with the one this connection last presented, no hash. Trusted as long as the cache would be.
    const memo = connection === undefined ? undefined : this.#byConnection.get(connection);
    if (memo !== undefined && memo.until > now) {
      const bytes = Buffer.from(presented);
      if (bytes.length === memo.key.length && timingSafeEqual(bytes, memo.key)) return memo.identity;
    }

    const presentedDigest = sha256Buffer(presented);
    let envMatch: ApiKeyIdentity | undefined;
    for (const candidate of this.#envKeys) {
      // No early exit: every configured key is compared, whichever matches.
      if (timingSafeEqual(candidate.digest, presentedDigest)) envMatch = candidate.identity;
    }
    let identity = envMatch;
    if (identity === undefined) {
      // The cache is keyed by the raw digest (latin1: a cheap one-byte string); Redis by its hex.
      const cacheKey = presentedDigest.toString('latin1');
      const cached = this.#cache.get(cacheKey);
      if (cached === undefined || cached.until <= now) {
        return this.#lookup(cacheKey, presentedDigest.toString('hex'), now);
      }
      identity = cached.identity;
      if (identity === undefined) return undefined; // unknown or revoked, as Redis said
    }
    if (connection !== undefined && this.#cacheMs > 0) {
      this.#byConnection.set(connection, {
        key: Buffer.from(presented),
        identity,
        until: now + this.#cacheMs,
      });
    }
    return identity;
  }

  /** Asks Redis (a key from the environment or the cache is answered without a promise, above). */
  async #lookup(cacheKey: string, digest: string, now: number): Promise<ApiKeyIdentity | undefined> {
    const record = await this.#redis.hgetall(this.#recordKey(digest));
    // A key whose tenant is not a valid tenant id (created before tenants were checked) cannot be
    // scoped: refused like an unknown key, and `herald keys list` shows it as such.
    const identity =
      record.id && !record.revokedAt && isTenantId(record.tenantId) ? toRecord(record) : undefined;
    if (this.#cacheMs > 0) {
      if (this.#cache.size > 10_000) this.#cache.clear();
      this.#cache.set(cacheKey, { identity, until: now + this.#cacheMs });
    }
    return identity;
  }

  /** Creates a key; the returned `key` is shown once and never stored. */
  async create(options: {
    name: string;
    tenantId: string;
    limits?: KeyLimits;
    inbox?: KeyInboxBounds;
  }): Promise<ApiKeyRecord & { key: string }> {
    if (!isNewTenantId(options.tenantId)) {
      throw new Error(
        `"${options.tenantId}" is not a tenant id: use 1 to 64 of A-Z a-z 0-9 _ . - (not . or .. alone)`,
      );
    }
    const key = `hk_${randomBytes(32).toString('base64url')}`;
    const digest = sha256(key);
    const record: ApiKeyRecord = {
      id: randomUUID(),
      name: options.name,
      tenantId: options.tenantId,
      limits: options.limits ?? {},
      ...(options.inbox && Object.keys(options.inbox).length > 0 ? { inbox: options.inbox } : {}),
      createdAt: new Date().toISOString(),
    };
    const fields: Record<string, string> = {
      id: record.id,
      name: record.name,
      tenantId: record.tenantId,
      createdAt: record.createdAt,
    };
    for (const field of LIMIT_FIELDS) {
      const value = record.limits[field];
      if (value !== undefined) fields[field] = String(value);
    }
    for (const [bound, field] of Object.entries(INBOX_FIELDS) as [keyof KeyInboxBounds, string][]) {
      const value = record.inbox?.[bound];
      if (value !== undefined) fields[field] = String(value);
    }
    await this.#redis.hset(this.#recordKey(digest), fields);
    await this.#redis.hset(this.#indexKey(), record.id, digest);
    return { ...record, key };
  }

  /** Every stored key, newest first, revoked ones included (with `revokedAt`). */
  async list(): Promise<ApiKeyRecord[]> {
    const index = await this.#redis.hgetall(this.#indexKey());
    const records = await Promise.all(
      Object.values(index).map(async (digest) => this.#redis.hgetall(this.#recordKey(digest))),
    );
    return records
      .filter((record) => record.id)
      .map(toRecord)
      .sort((a, b) => b.createdAt.localeCompare(a.createdAt));
  }

  /** Stored key `id` (revoked or not), or undefined when there is none (keys from `HERALD_API_KEYS` are not stored). */
  async get(id: string): Promise<ApiKeyRecord | undefined> {
    const digest = await this.#redis.hget(this.#indexKey(), id);
    if (!digest) return undefined;
    const fields = await this.#redis.hgetall(this.#recordKey(digest));
    return fields.id ? toRecord(fields) : undefined;
  }

  /**
   * Revokes key `id`; false when there is no such key. Every gateway refuses it within `cacheMs`, and
   * the realtime servers refuse the user tokens it minted and disconnect their sockets (the id joins
   * the set `revokedApiKeysKey(prefix)`).
   */
  async revoke(id: string): Promise<boolean> {
    const digest = await this.#redis.hget(this.#indexKey(), id);
    if (!digest) return false;
    await this.#redis.hset(this.#recordKey(digest), 'revokedAt', new Date().toISOString());
    await this.#redis.sadd(revokedApiKeysKey(this.#prefix), id);
    this.#cache.delete(Buffer.from(digest, 'hex').toString('latin1'));
    return true;
  }
}

function toRecord(fields: Record<string, string>): ApiKeyRecord {
  const limits: KeyLimits = {};
  for (const field of LIMIT_FIELDS) {
    const value = fields[field];
    if (value !== undefined) limits[field] = Number(value);
  }
  const inbox: KeyInboxBounds = {};
  for (const [bound, field] of Object.entries(INBOX_FIELDS) as [keyof KeyInboxBounds, string][]) {
    const value = fields[field];
    if (value !== undefined) inbox[bound] = Number(value);
  }
  return {
    id: fields.id ?? '',
    name: fields.name ?? '',
    tenantId: fields.tenantId ?? '',
    limits,
    ...(Object.keys(inbox).length > 0 ? { inbox } : {}),
    createdAt: fields.createdAt ?? '',
    ...(fields.revokedAt ? { revokedAt: fields.revokedAt } : {}),
  };
}
