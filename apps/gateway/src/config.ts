import { ConfigError, RedisWaitEnv, readServerEnv, type ServerConfig, ServerEnv } from '@herald/config';
import { InboxEnv, inboxSettings } from '@herald/inbox';
import { PushKeyEnv, resolvePush, serverEnvExtras } from '@herald/push';
import { WebhookUrlEnv } from '@herald/webhooks';
import Type from 'typebox';
import { ENVELOPE_TARGET_ITEMS, ENVELOPE_WINDOW_MS } from './envelopes.js';

/**
 * Largest rate (tokens per second) and burst a limiter setting takes: the buckets count microtokens in
 * doubles, exact up to 2^53, so 10^9 tokens (10^15 microtokens) keeps every decision exact.
 */
export const MAX_LIMIT = 1_000_000_000;
/**
 * Smallest rate a limiter setting takes, tokens per second (one token in ~11.6 days): a bucket refills
 * fully in burst / rate, which its key's expiry must hold (10^9 / 10^-6 s fits Redis's; 1e-300 did not,
 * and every decision failed).
 */
export const MIN_RATE = 0.000001;

/** Most time a limiter decision may take by default, ms (`HERALD_RATE_LIMIT_TIMEOUT_MS`). */
const LIMITER_TIMEOUT_MS = 150;

export { ConfigError, DEV_ADMIN_KEY, DEV_API_KEY } from '@herald/config';

/** Every variable the gateway reads (nothing else is looked at). */
export const EnvSchema = Type.Object({
  ...ServerEnv(3000),
  ...WebhookUrlEnv,
  ...PushKeyEnv,
  // Checked by resolveSecrets: 32+ bytes each, development values only in development mode.
  HERALD_API_KEYS: Type.Optional(Type.String()),
  HERALD_ADMIN_KEY: Type.Optional(Type.String()),
  HERALD_JWT_SECRET: Type.Optional(Type.String()),
  HERALD_TOKEN_TTL_SECONDS: Type.Integer({ minimum: 1, maximum: 2_592_000, default: 3600 }),
  HERALD_RATE_LIMIT_PER_SECOND: Type.Number({ minimum: MIN_RATE, maximum: MAX_LIMIT, default: 10 }),
  HERALD_RATE_LIMIT_BURST: Type.Integer({ minimum: 1, maximum: MAX_LIMIT, default: 10 }),
  // No braces: the prefix would become every tenant's hash tag (one slot for them all on a Cluster).
  HERALD_RATE_LIMIT_PREFIX: Type.String({ pattern: '^[^{}]*$', default: 'ratelimit:' }),
  HERALD_SENDER_RATE_LIMIT_PER_SECOND: Type.Number({ minimum: MIN_RATE, maximum: MAX_LIMIT, default: 100 }),
  HERALD_SENDER_RATE_LIMIT_BURST: Type.Integer({ minimum: 1, maximum: MAX_LIMIT, default: 200 }),
  HERALD_TOKEN_RATE_LIMIT_PER_SECOND: Type.Number({ minimum: MIN_RATE, maximum: MAX_LIMIT, default: 50 }),
  HERALD_TOKEN_RATE_LIMIT_BURST: Type.Integer({ minimum: 1, maximum: MAX_LIMIT, default: 100 }),
  HERALD_INBOX_RATE_LIMIT_PER_SECOND: Type.Number({ minimum: MIN_RATE, maximum: MAX_LIMIT, default: 100 }),
  HERALD_INBOX_RATE_LIMIT_BURST: Type.Integer({ minimum: 1, maximum: MAX_LIMIT, default: 200 }),
  HERALD_RATE_LIMIT_FAILURE: Type.Union(
    [Type.Literal('closed'), Type.Literal('open'), Type.Literal('local')],
    {
      default: 'closed',
    },
  ),
  HERALD_RATE_LIMIT_TIMEOUT_MS: Type.Optional(Type.Integer({ minimum: 10, maximum: 10_000 })),
  HERALD_EXPECTED_GATEWAYS: Type.Integer({ minimum: 1, maximum: 1000, default: 1 }),
  HERALD_API_KEY_CACHE_MS: Type.Integer({ minimum: 0, maximum: 1000, default: 500 }),
  HERALD_IDEMPOTENCY_TTL_SECONDS: Type.Integer({ minimum: 60, maximum: 2_592_000, default: 86_400 }),
  HERALD_IDEMPOTENCY_IN_FLIGHT_MS: Type.Integer({ minimum: 1000, maximum: 600_000, default: 5000 }),
  HERALD_REDIS_TIMEOUT_MS: Type.Integer({ minimum: 50, maximum: 10_000, default: 800 }),
  ...RedisWaitEnv,
  HERALD_JOB_ATTEMPTS: Type.Integer({ minimum: 1, maximum: 100, default: 8 }),
  HERALD_JOB_BACKOFF_MS: Type.Integer({ minimum: 1, maximum: 3_600_000, default: 1000 }),
  HERALD_ENVELOPE_WINDOW_MS: Type.Optional(Type.Integer({ minimum: 0, maximum: 1000 })),
  HERALD_ENVELOPE_MAX_ITEMS: Type.Integer({ minimum: 1, maximum: 1000, default: 200 }),
  HERALD_ENVELOPE_TARGET_ITEMS: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
  ...InboxEnv,
  HERALD_DURABILITY: Type.Union([Type.Literal('redis'), Type.Literal('aof')], { default: 'redis' }),
});

/** The gateway's settings, parsed once at start-up and frozen. */
export interface GatewayConfig extends ServerConfig {
  /**
   * `HERALD_REDIS_WAIT_REPLICAS`: replicas that must have a notification's job (`WAIT`) before its `202`;
   * fewer within `redisTimeoutMs` is a `503` with `maybeAccepted` (retry with the same key). 0: the primary alone.
   */
  redisWaitReplicas: number;
  /** API keys from the environment (development); production keys live hashed in Redis. */
  apiKeys: readonly string[];
  /** True when `dev-key` is accepted (development mode only). */
  usingDevApiKey: boolean;
  /**
   * `HERALD_ADMIN_KEY`: the operator's key for the admin API (`/admin/*`); undefined (the admin API is
   * off) when unset in production, `dev-admin-key` when unset in development mode.
   */
  adminKey: string | undefined;
  /** True when `dev-admin-key` is accepted (development mode only). */
  usingDevAdminKey: boolean;
  /** `HERALD_DEV_MODE=true`: development secrets are accepted (see the README's security model). */
  devMode: boolean;
  /** Webhook URLs may point to loopback and private addresses (`HERALD_WEBHOOK_ALLOW_PRIVATE` or development mode). */
  webhookAllowPrivate: boolean;
  /** `HERALD_VAPID_PUBLIC_KEY` set (or development mode): `escalateAfterMs` is taken; otherwise 422. */
  pushEnabled: boolean;
  /** What to log about Web Push at start-up (off, or on with the development keys). */
  pushWarnings: readonly string[];
  jwtSecret: string;
  usingDevJwtSecret: boolean;
  tokenTtlSeconds: number;
  /** Default limits; an API key may carry its own. */
  rateLimit: {
    /** Per recipient `userId`. */
    perSecond: number;
    burst: number;
    /** Per API key (sender). */
    senderPerSecond: number;
    senderBurst: number;
    /** Per API key: `POST /tokens`, and the inbox routes. */
    tokens: { perSecond: number; burst: number };
    inbox: { perSecond: number; burst: number };
    keyPrefix: string;
    /** What the limiter does when Redis fails: deny, allow, or limit locally. */
    failure: 'closed' | 'open' | 'local';
    /** Most time a limiter decision may take before `failure` decides instead, ms. */
    timeoutMs: number;
    /** Gateways sharing the limit; the `local` fallback allows limit ÷ this per instance. */
    expectedInstances: number;
  };
  /** How long a gateway trusts a looked-up API key before asking Redis again (revocation delay). */
  apiKeyCacheMs: number;
  idempotencyTtlSeconds: number;
  /** How long a claimed `Idempotency-Key` answers 409 before a retry may take over (a dead gateway's). */
  idempotencyInFlightMs: number;
  /** A Redis operation that takes longer is abandoned and the request answered 503. */
  redisTimeoutMs: number;
  /** `redis`: 202 once the primary has the job. `aof`: also once it is fsynced to the AOF (WAITAOF, Redis ≥ 7.2). */
  durability: 'redis' | 'aof';
  /** Delivery attempts before a notification is `failed`, and the first backoff (doubling, with jitter). */
  jobAttempts: number;
  jobBackoffMs: number;
  /**
   * `HERALD_ENVELOPE_WINDOW_MS`: the gateway gathers the notifications it accepts without delay or
   * priority into one queue job (an envelope, one BullMQ job for many notifications: a fraction of the
   * Redis work) for at most this long after the first joins (less at higher rates, none when every
   * request held is waiting: see Envelopes), at most `HERALD_ENVELOPE_MAX_ITEMS` per envelope; on one
   * Redis server before their limiter decisions, one call per envelope (see Gathering). 0: one job per
   * notification.
   */
  envelopeWindowMs: number;
  envelopeMaxItems: number;
  /**
   * `HERALD_ENVELOPE_TARGET_ITEMS`: an envelope lingers for as long as the recent arrival rate takes to
   * bring this many notifications (within the window). A larger target: fewer jobs and less Redis work
   * per notification at a given rate, for a longer wait (see ArrivalRate).
   */
  envelopeTargetItems: number;
  /** Where the inbox lives; must match the worker's and the realtime servers'. */
  inbox: ReturnType<typeof inboxSettings>;
  /** Pub/sub to the realtime servers (unread counts after a REST read); must match theirs. */
  pubsub: { key: string; mode: 'classic' | 'sharded' };
}

/**
 * Reads the gateway's configuration from `env` (default `process.env`) and nothing else: every problem
 * is named in one {@link ConfigError}. `secrets: false` (the operator CLI, which signs nothing and
 * authenticates no one) skips the checks of `HERALD_JWT_SECRET` and `HERALD_API_KEYS`.
 */
export function loadConfig(
  env: Record<string, string | undefined> = process.env,
  options: { secrets?: boolean } = {},
): GatewayConfig {
  const push = resolvePush(env, { sender: false });
  const secretOptions = { apiKeys: true, adminKey: true, check: options.secrets !== false };
  const read = readServerEnv('gateway', EnvSchema, env, secretOptions, serverEnvExtras(push));
  const { values: parsed, server, secrets } = read;
  // BullMQ's scripts take several keys of one queue: on Cluster they must share a slot.
  if (server.redisClusterNodes !== undefined && !/\{[^}]+\}/.test(parsed.HERALD_QUEUE_PREFIX)) {
    throw new ConfigError(
      `Invalid gateway configuration: HERALD_QUEUE_PREFIX "${parsed.HERALD_QUEUE_PREFIX}" has no hash tag, which Redis Cluster needs (one queue, one slot): use e.g. "{herald}", the default.`,
    );
  }
  // A request waits for its envelope's window and then its add, within the Redis timeout.
  // Unset: the default window, or a quarter of a Redis timeout too short for it.
  const envelopeWindowMs =
    parsed.HERALD_ENVELOPE_WINDOW_MS ??
    Math.min(ENVELOPE_WINDOW_MS, Math.floor(parsed.HERALD_REDIS_TIMEOUT_MS / 4));
  if (envelopeWindowMs * 4 > parsed.HERALD_REDIS_TIMEOUT_MS) {
    throw new ConfigError(
      `Invalid gateway configuration: HERALD_ENVELOPE_WINDOW_MS (${parsed.HERALD_ENVELOPE_WINDOW_MS}) must be at most a quarter of HERALD_REDIS_TIMEOUT_MS (${parsed.HERALD_REDIS_TIMEOUT_MS}): a request waits for its envelope, then for Redis, within that timeout.`,
    );
  }
  // A limiter decision is one of the request's Redis operations: no slower than the others may be.
  // Unset: 150 ms, or the Redis timeout when that is shorter.
  const limiterTimeoutMs =
    parsed.HERALD_RATE_LIMIT_TIMEOUT_MS ?? Math.min(LIMITER_TIMEOUT_MS, parsed.HERALD_REDIS_TIMEOUT_MS);
  if (limiterTimeoutMs > parsed.HERALD_REDIS_TIMEOUT_MS) {
    throw new ConfigError(
      `Invalid gateway configuration: HERALD_RATE_LIMIT_TIMEOUT_MS (${parsed.HERALD_RATE_LIMIT_TIMEOUT_MS}) must be at most HERALD_REDIS_TIMEOUT_MS (${parsed.HERALD_REDIS_TIMEOUT_MS}): a request's Redis operations each answer within that timeout.`,
    );
  }
  // Unset: the default target, or every envelope full when HERALD_ENVELOPE_MAX_ITEMS is smaller.
  const envelopeTargetItems =
    parsed.HERALD_ENVELOPE_TARGET_ITEMS ?? Math.min(ENVELOPE_TARGET_ITEMS, parsed.HERALD_ENVELOPE_MAX_ITEMS);
  if (envelopeTargetItems > parsed.HERALD_ENVELOPE_MAX_ITEMS) {
    throw new ConfigError(
      `Invalid gateway configuration: HERALD_ENVELOPE_TARGET_ITEMS (${parsed.HERALD_ENVELOPE_TARGET_ITEMS}) must be at most HERALD_ENVELOPE_MAX_ITEMS (${parsed.HERALD_ENVELOPE_MAX_ITEMS}): an envelope goes when full.`,
    );
  }
  return Object.freeze({
    ...server,
    redisWaitReplicas: parsed.HERALD_REDIS_WAIT_REPLICAS,
    apiKeys: secrets.apiKeys,
    usingDevApiKey: secrets.usingDevApiKey,
    adminKey: secrets.adminKey,
    usingDevAdminKey: secrets.usingDevAdminKey,
    devMode: secrets.devMode,
    webhookAllowPrivate: parsed.HERALD_WEBHOOK_ALLOW_PRIVATE || secrets.devMode,
    pushEnabled: push.enabled,
    pushWarnings: push.warnings,
    jwtSecret: secrets.jwtSecret,
    usingDevJwtSecret: secrets.usingDevJwtSecret,
    tokenTtlSeconds: parsed.HERALD_TOKEN_TTL_SECONDS,
    rateLimit: Object.freeze({
      perSecond: parsed.HERALD_RATE_LIMIT_PER_SECOND,
      burst: parsed.HERALD_RATE_LIMIT_BURST,
      senderPerSecond: parsed.HERALD_SENDER_RATE_LIMIT_PER_SECOND,
      senderBurst: parsed.HERALD_SENDER_RATE_LIMIT_BURST,
      tokens: Object.freeze({
        perSecond: parsed.HERALD_TOKEN_RATE_LIMIT_PER_SECOND,
        burst: parsed.HERALD_TOKEN_RATE_LIMIT_BURST,
      }),
      inbox: Object.freeze({
        perSecond: parsed.HERALD_INBOX_RATE_LIMIT_PER_SECOND,
        burst: parsed.HERALD_INBOX_RATE_LIMIT_BURST,
      }),
      keyPrefix: parsed.HERALD_RATE_LIMIT_PREFIX,
      failure: parsed.HERALD_RATE_LIMIT_FAILURE,
      timeoutMs: limiterTimeoutMs,
      expectedInstances: parsed.HERALD_EXPECTED_GATEWAYS,
    }),
    apiKeyCacheMs: parsed.HERALD_API_KEY_CACHE_MS,
    idempotencyTtlSeconds: parsed.HERALD_IDEMPOTENCY_TTL_SECONDS,
    idempotencyInFlightMs: parsed.HERALD_IDEMPOTENCY_IN_FLIGHT_MS,
    redisTimeoutMs: parsed.HERALD_REDIS_TIMEOUT_MS,
    durability: parsed.HERALD_DURABILITY,
    jobAttempts: parsed.HERALD_JOB_ATTEMPTS,
    jobBackoffMs: parsed.HERALD_JOB_BACKOFF_MS,
    envelopeWindowMs,
    envelopeMaxItems: parsed.HERALD_ENVELOPE_MAX_ITEMS,
    envelopeTargetItems,
    inbox: inboxSettings(parsed),
    pubsub: Object.freeze({ key: parsed.HERALD_PUBSUB_KEY, mode: parsed.HERALD_PUBSUB_MODE }),
  });
}
