import { DEFAULT_PUBSUB_KEY, DEFAULT_QUEUE_NAME, DEFAULT_QUEUE_PREFIX } from '@herald/protocol';
import { envSchema } from 'env-schema';
import Type, { type Static } from 'typebox';

const EnvSchema = Type.Object({
  REDIS_URL: Type.String({ pattern: '^rediss?://', default: 'redis://127.0.0.1:6379' }),
  HERALD_QUEUE_NAME: Type.String({ minLength: 1, default: DEFAULT_QUEUE_NAME }),
  HERALD_QUEUE_PREFIX: Type.String({ minLength: 1, default: DEFAULT_QUEUE_PREFIX }),
  HERALD_PUBSUB_KEY: Type.String({ minLength: 1, default: DEFAULT_PUBSUB_KEY }),
  HERALD_WORKER_CONCURRENCY: Type.Integer({ minimum: 1, maximum: 1000, default: 50 }),
  HERALD_LOG_LEVEL: Type.Union(
    ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((level) => Type.Literal(level)),
    { default: 'info' },
  ),
  HERALD_LOG_FORMAT: Type.Union([Type.Literal('json'), Type.Literal('pretty')], { default: 'json' }),
});
type Env = Static<typeof EnvSchema>;

/** The worker's settings, parsed once at start-up and frozen. */
export interface WorkerConfig {
  redisUrl: string;
  queue: { name: string; prefix: string };
  /** Channel prefix shared with the realtime servers' Redis adapter. */
  pubsubKey: string;
  concurrency: number;
  log: { level: string; format: 'json' | 'pretty' };
}

/** Reads the worker's configuration from `env`; every problem is named in one error. */
export function loadConfig(env: Record<string, string | undefined> = process.env): WorkerConfig {
  let parsed: Env;
  try {
    parsed = envSchema<Env>({ schema: EnvSchema, data: withoutEmptyValues(env), dotenv: false });
  } catch (error) {
    throw new Error(`Invalid worker configuration: ${(error as Error).message}`, { cause: error });
  }
  return Object.freeze({
    redisUrl: parsed.REDIS_URL,
    queue: Object.freeze({ name: parsed.HERALD_QUEUE_NAME, prefix: parsed.HERALD_QUEUE_PREFIX }),
    pubsubKey: parsed.HERALD_PUBSUB_KEY,
    concurrency: parsed.HERALD_WORKER_CONCURRENCY,
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
