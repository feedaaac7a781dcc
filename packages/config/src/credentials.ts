import type { Cluster, Redis } from 'ioredis';

/** Redis refusing a connection's `AUTH` (or a command before it): a wrong or missing password or user. */
const REFUSED =
  /^(WRONGPASS|NOAUTH)\b|invalid password|AUTH <password> called without any password configured/i;

/** The last credentials refusal of each client created by `createRedis`, until it connects again. */
const refusals = new WeakMap<Redis | Cluster, string>();

/**
 * Redis refused the credentials of `REDIS_URL`: what readiness answers, naming the setting, instead of
 * an unavailable Redis (ioredis reconnects for ever, and every command fails with "Connection is closed").
 */
export class RedisCredentialsError extends Error {
  readonly code = 'HERALD_ERR_REDIS_CREDENTIALS';
  constructor(refusal: string) {
    super(
      `Redis refused the credentials of REDIS_URL (${refusal}): set its user and password (redis://<user>:<password>@host:port; the password alone: redis://:<password>@host:port) to those Redis expects (requirepass or ACL)`,
    );
    this.name = 'RedisCredentialsError';
  }
}

/** Records the credentials refusals of `redis` (and, on Cluster, of its nodes); see {@link credentialsRefused}. */
export function watchCredentials(redis: Redis | Cluster): void {
  const note = (error: Error) => {
    if (error instanceof Error && REFUSED.test(error.message)) refusals.set(redis, error.message);
  };
  redis.on('error', note);
  if (redis.isCluster) redis.on('node error', note);
  redis.on('ready', () => refusals.delete(redis));
}

/**
 * A {@link RedisCredentialsError} when Redis refused `redis`'s credentials since it last connected,
 * else undefined.
 *
 * @example
 * ```ts
 * const refused = credentialsRefused(redis);
 * if (refused) throw refused;
 * ```
 */
export function credentialsRefused(redis: Redis | Cluster): RedisCredentialsError | undefined {
  const refusal = refusals.get(redis);
  return refusal === undefined ? undefined : new RedisCredentialsError(refusal);
}
