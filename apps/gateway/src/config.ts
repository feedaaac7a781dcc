import { DEFAULT_QUEUE_NAME, DEFAULT_QUEUE_PREFIX, DEV_JWT_SECRET } from '@herald/protocol';
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
  HERALD_QUEUE_NAME: Type.String({ minLength: 1, default: DEFAULT_QUEUE_NAME }),
  HERALD_QUEUE_PREFIX: Type.String({ minLength: 1, default: DEFAULT_QUEUE_PREFIX }),
  HERALD_LOG_LEVEL: Type.Union(
    ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((level) => Type.Literal(level)),
    { default: 'info' },
  ),
  HERALD_LOG_FORMAT: Type.Union([Type.Literal('json'), Type.Literal('pretty')], { default: 'json' }),
});
type Env = Static<typeof EnvSchema>;

/** The gateway's settings, parsed once at start-up and frozen. */
export interface GatewayConfig {
  port: number;
  host: string;
  redisUrl: string;
  /** Accepted API keys. */
  apiKeys: readonly string[];
  /** True when no keys were configured and `dev-key` is accepted. */
  usingDevApiKey: boolean;
  jwtSecret: string;
  usingDevJwtSecret: boolean;
  tokenTtlSeconds: number;
  rateLimit: { perSecond: number; burst: number; keyPrefix: string };
  queue: { name: string; prefix: string };
  log: { level: string; format: 'json' | 'pretty' };
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
  const apiKeys = (parsed.HERALD_API_KEYS ?? '')
    .split(',')
    .map((key) => key.trim())
    .filter((key) => key.length > 0);
  const usingDevApiKey = apiKeys.length === 0;
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
      keyPrefix: parsed.HERALD_RATE_LIMIT_PREFIX,
    }),
    queue: Object.freeze({ name: parsed.HERALD_QUEUE_NAME, prefix: parsed.HERALD_QUEUE_PREFIX }),
    log: Object.freeze({ level: parsed.HERALD_LOG_LEVEL, format: parsed.HERALD_LOG_FORMAT }),
  });
}

/** `FOO=` (as compose writes an unset variable) means unset, not an empty setting. */
function withoutEmptyValues(env: Record<string, string | undefined>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(env).filter(
      (entry): entry is [string, string] => entry[1] !== undefined && entry[1] !== '',
    ),
  );
}
