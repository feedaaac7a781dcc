import { DEFAULT_PUBSUB_KEY, DEV_JWT_SECRET } from '@herald/protocol';
import { envSchema } from 'env-schema';
import Type, { type Static } from 'typebox';

const EnvSchema = Type.Object({
  PORT: Type.Integer({ minimum: 0, maximum: 65535, default: 3001 }),
  HOST: Type.String({ minLength: 1, default: '0.0.0.0' }),
  REDIS_URL: Type.String({ pattern: '^rediss?://', default: 'redis://127.0.0.1:6379' }),
  HERALD_JWT_SECRET: Type.Optional(Type.String({ minLength: 16 })),
  HERALD_PUBSUB_KEY: Type.String({ minLength: 1, default: DEFAULT_PUBSUB_KEY }),
  HERALD_CORS_ORIGIN: Type.String({ minLength: 1, default: '*' }),
  HERALD_LOG_LEVEL: Type.Union(
    ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((level) => Type.Literal(level)),
    { default: 'info' },
  ),
  HERALD_LOG_FORMAT: Type.Union([Type.Literal('json'), Type.Literal('pretty')], { default: 'json' }),
});
type Env = Static<typeof EnvSchema>;

/** The realtime server's settings, parsed once at start-up and frozen. */
export interface RealtimeConfig {
  port: number;
  host: string;
  redisUrl: string;
  jwtSecret: string;
  usingDevJwtSecret: boolean;
  /** Channel prefix shared with the workers' Redis emitter. */
  pubsubKey: string;
  /** Allowed browser origins: `*`, or a comma-separated list. */
  corsOrigin: string | string[];
  log: { level: string; format: 'json' | 'pretty' };
}

/** Reads the realtime server's configuration from `env`; every problem is named in one error. */
export function loadConfig(env: Record<string, string | undefined> = process.env): RealtimeConfig {
  let parsed: Env;
  try {
    parsed = envSchema<Env>({ schema: EnvSchema, data: withoutEmptyValues(env), dotenv: false });
  } catch (error) {
    throw new Error(`Invalid realtime configuration: ${(error as Error).message}`, { cause: error });
  }
  const origins = parsed.HERALD_CORS_ORIGIN.split(',').map((origin) => origin.trim());
  return Object.freeze({
    port: parsed.PORT,
    host: parsed.HOST,
    redisUrl: parsed.REDIS_URL,
    jwtSecret: parsed.HERALD_JWT_SECRET ?? DEV_JWT_SECRET,
    usingDevJwtSecret: parsed.HERALD_JWT_SECRET === undefined,
    pubsubKey: parsed.HERALD_PUBSUB_KEY,
    corsOrigin: origins.length === 1 && origins[0] === '*' ? '*' : origins,
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
