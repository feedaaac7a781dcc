import { InboxEnv, inboxSettings } from '@herald/inbox';
import {
  DEFAULT_PUBSUB_KEY,
  DEFAULT_QUEUE_NAME,
  DEFAULT_QUEUE_PREFIX,
  DEV_JWT_SECRET,
  LogEnv,
  type LogSettings,
  logSettings,
  withoutEmptyValues,
} from '@herald/protocol';
import { envSchema } from 'env-schema';
import Type, { type Static } from 'typebox';

/** API key accepted when `HERALD_API_KEYS` is unset. Development only. */
export const DEV_API_KEY = 'dev-key';

const EnvSchema = Type.Object({
  PORT: Type.Integer({ minimum: 0, maximum: 65535, default: 3000 }),
  HOST: Type.String({ minLength: 1, default: '0.0.0.0' }),
  REDIS_URL: Type.String({ pattern: '^rediss?://', default: 'redis://127.0.0.1:6379' }),
  HERALD_API_KEYS: Type.Optional(Type.String()),
  HERALD_JWT_SECRET: Type.Optional(Type.String({ minLength: 16 })),
  HERALD_TOKEN_TTL_SECONDS: Type.Integer({ minimum: 1, maximum: 2_592_000, default: 3600 }),
  HERALD_RATE_LIMIT_PER_SECOND: Type.Number({ exclusiveMinimum: 0, default: 10 }),
  HERALD_RATE_LIMIT_BURST: Type.Integer({ minimum: 1, default: 10 }),
  HERALD_RATE_LIMIT_PREFIX: Type.String({ default: 'ratelimit:' }),
  HERALD_SENDER_RATE_LIMIT_PER_SECOND: Type.Number({ exclusiveMinimum: 0, default: 100 }),
  HERALD_SENDER_RATE_LIMIT_BURST: Type.Integer({ minimum: 1, default: 200 }),
  HERALD_TOKEN_RATE_LIMIT_PER_SECOND: Type.Number({ exclusiveMinimum: 0, default: 50 }),
  HERALD_TOKEN_RATE_LIMIT_BURST: Type.Integer({ minimum: 1, default: 100 }),
  HERALD_INBOX_RATE_LIMIT_PER_SECOND: Type.Number({ exclusiveMinimum: 0, default: 100 }),
  HERALD_INBOX_RATE_LIMIT_BURST: Type.Integer({ minimum: 1, default: 200 }),
  HERALD_RATE_LIMIT_FAILURE: Type.Union(
    [Type.Literal('closed'), Type.Literal('open'), Type.Literal('local')],
    {
      default: 'closed',
    },
  ),
  HERALD_EXPECTED_GATEWAYS: Type.Integer({ minimum: 1, default: 1 }),
  HERALD_KEY_PREFIX: Type.String({ default: 'herald:' }),
  HERALD_API_KEY_CACHE_MS: Type.Integer({ minimum: 0, maximum: 1000, default: 500 }),
  HERALD_IDEMPOTENCY_TTL_SECONDS: Type.Integer({ minimum: 60, default: 86_400 }),
  HERALD_REDIS_TIMEOUT_MS: Type.Integer({ minimum: 50, maximum: 10_000, default: 800 }),
  HERALD_JOB_ATTEMPTS: Type.Integer({ minimum: 1, maximum: 100, default: 8 }),
  HERALD_JOB_BACKOFF_MS: Type.Integer({ minimum: 1, maximum: 3_600_000, default: 1000 }),
  HERALD_PUBSUB_KEY: Type.String({ minLength: 1, default: DEFAULT_PUBSUB_KEY }),
  HERALD_PUBSUB_MODE: Type.Union([Type.Literal('classic'), Type.Literal('sharded')], { default: 'classic' }),
  ...InboxEnv,
  HERALD_DURABILITY: Type.Union([Type.Literal('redis'), Type.Literal('aof')], { default: 'redis' }),
  HERALD_QUEUE_NAME: Type.String({ minLength: 1, default: DEFAULT_QUEUE_NAME }),
  HERALD_QUEUE_PREFIX: Type.String({ minLength: 1, default: DEFAULT_QUEUE_PREFIX }),
  ...LogEnv,
});
type Env = Static<typeof EnvSchema>;

/** The gateway's settings, parsed once at start-up and frozen. */
export interface GatewayConfig {
  port: number;
  host: string;
  redisUrl: string;
  /** API keys from the environment (development); production keys live hashed in Redis. */
  apiKeys: readonly string[];
  /** True when no keys were configured and `dev-key` is accepted. */
  usingDevApiKey: boolean;
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
    /** Gateways sharing the limit; the `local` fallback allows limit ÷ this per instance. */
    expectedInstances: number;
  };
  /** Prefix of the gateway's own keys (API keys, idempotency records, statuses). */
  keyPrefix: string;
  /** How long a gateway trusts a looked-up API key before asking Redis again (revocation delay). */
  apiKeyCacheMs: number;
  idempotencyTtlSeconds: number;
  /** A Redis operation that takes longer is abandoned and the request answered 503. */
  redisTimeoutMs: number;
  /** `redis`: 202 once the primary has the job. `aof`: also once it is fsynced to the AOF (WAITAOF, Redis ≥ 7.2). */
  durability: 'redis' | 'aof';
  /** Delivery attempts before a notification is `failed`, and the first backoff (doubling, with jitter). */
  jobAttempts: number;
  jobBackoffMs: number;
  /** Where the inbox lives; must match the worker's and the realtime servers'. */
  inbox: ReturnType<typeof inboxSettings>;
  /** Pub/sub to the realtime servers (unread counts after a REST read); must match theirs. */
  pubsub: { key: string; mode: 'classic' | 'sharded' };
  queue: { name: string; prefix: string };
  log: LogSettings;
}

/** Thrown when the environment does not describe a valid configuration; lists every problem. */
export class ConfigError extends Error {
  readonly code = 'HERALD_ERR_CONFIG';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ConfigError';
  }
}

/**
 * Reads the gateway's configuration from `env` (default `process.env`): every problem is named in
 * one error.
 */
export function loadConfig(env: Record<string, string | undefined> = process.env): GatewayConfig {
  let parsed: Env;
  try {
    parsed = envSchema<Env>({
      schema: EnvSchema,
      data: withoutEmptyValues(env),
      dotenv: false,
      ajv: {
        customOptions(ajv) {
          ajv.opts.allErrors = true;
          return ajv;
        },
      },
    });
  } catch (error) {
    throw new ConfigError(`Invalid gateway configuration: ${(error as Error).message}`, { cause: error });
  }
  if (parsed.HERALD_REDIS_CLUSTER_NODES !== undefined) {
    throw new ConfigError(
      'Invalid gateway configuration: HERALD_REDIS_CLUSTER_NODES is set, but the gateway does not run on Redis Cluster yet; point REDIS_URL at a single Redis (the worker and realtime servers support Cluster).',
    );
  }
  // `none`: only keys stored in Redis (created with `herald keys create`) are accepted.
  const apiKeys =
    parsed.HERALD_API_KEYS === 'none'
      ? []
      : (parsed.HERALD_API_KEYS ?? '')
          .split(',')
          .map((key) => key.trim())
          .filter((key) => key.length > 0);
  const usingDevApiKey = parsed.HERALD_API_KEYS === undefined;
  return Object.freeze({
    port: parsed.PORT,
    host: parsed.HOST,
    redisUrl: parsed.REDIS_URL,
    apiKeys: Object.freeze(usingDevApiKey ? [DEV_API_KEY] : apiKeys),
    usingDevApiKey,
    jwtSecret: parsed.HERALD_JWT_SECRET ?? DEV_JWT_SECRET,
    usingDevJwtSecret: parsed.HERALD_JWT_SECRET === undefined,
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
      expectedInstances: parsed.HERALD_EXPECTED_GATEWAYS,
    }),
    keyPrefix: parsed.HERALD_KEY_PREFIX,
    apiKeyCacheMs: parsed.HERALD_API_KEY_CACHE_MS,
    idempotencyTtlSeconds: parsed.HERALD_IDEMPOTENCY_TTL_SECONDS,
    redisTimeoutMs: parsed.HERALD_REDIS_TIMEOUT_MS,
    durability: parsed.HERALD_DURABILITY,
    jobAttempts: parsed.HERALD_JOB_ATTEMPTS,
    jobBackoffMs: parsed.HERALD_JOB_BACKOFF_MS,
    inbox: inboxSettings(parsed),
    pubsub: Object.freeze({ key: parsed.HERALD_PUBSUB_KEY, mode: parsed.HERALD_PUBSUB_MODE }),
    queue: Object.freeze({ name: parsed.HERALD_QUEUE_NAME, prefix: parsed.HERALD_QUEUE_PREFIX }),
    log: logSettings(parsed),
  });
}
