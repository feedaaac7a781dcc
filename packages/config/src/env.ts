import { ErrorCode } from '@herald/protocol';
import { envSchema } from 'env-schema';
import Type, { type Static, type TObject } from 'typebox';

/**
 * Every `HERALD_*` variable some Herald app reads. An app warns about any other `HERALD_*` variable
 * (a typo such as `HERALD_JWT_SECRETT`) and ignores it; a variable another app reads is not reported, so
 * one environment can serve all three apps. Each app's config test checks that its schema is listed here
 * and the protocol test that the README's configuration table lists every name.
 */
export const HERALD_VARIABLES: readonly string[] = Object.freeze([
  'HERALD_DEV_MODE',
  'HERALD_DEPLOYMENT',
  'HERALD_API_KEYS',
  'HERALD_ADMIN_KEY',
  'HERALD_JWT_SECRET',
  'HERALD_TOKEN_TTL_SECONDS',
  'HERALD_RATE_LIMIT_PER_SECOND',
  'HERALD_RATE_LIMIT_BURST',
  'HERALD_RATE_LIMIT_PREFIX',
  'HERALD_TOKEN_RATE_LIMIT_BURST',
  'HERALD_TOKEN_RATE_LIMIT_PER_SECOND',
  'HERALD_INBOX_RATE_LIMIT_BURST',
  'HERALD_INBOX_RATE_LIMIT_PER_SECOND',
  'HERALD_SOCKET_EVENTS_BURST',
  'HERALD_SOCKET_EVENTS_PER_SECOND',
  'HERALD_USER_EVENTS_BURST',
  'HERALD_USER_EVENTS_PER_SECOND',
  'HERALD_REFUSED_HANDSHAKES_BURST',
  'HERALD_REFUSED_HANDSHAKES_PER_SECOND',
  'HERALD_TRUST_PROXY',
  'HERALD_REVOCATION_CHECK_MS',
  'HERALD_SENDER_RATE_LIMIT_PER_SECOND',
  'HERALD_SENDER_RATE_LIMIT_BURST',
  'HERALD_RATE_LIMIT_FAILURE',
  'HERALD_RATE_LIMIT_TIMEOUT_MS',
  'HERALD_EXPECTED_GATEWAYS',
  'HERALD_KEY_PREFIX',
  'HERALD_API_KEY_CACHE_MS',
  'HERALD_IDEMPOTENCY_TTL_SECONDS',
  'HERALD_IDEMPOTENCY_IN_FLIGHT_MS',
  'HERALD_REDIS_TIMEOUT_MS',
  'HERALD_JOB_ATTEMPTS',
  'HERALD_JOB_BACKOFF_MS',
  'HERALD_ENVELOPE_WINDOW_MS',
  'HERALD_ENVELOPE_MAX_ITEMS',
  'HERALD_ENVELOPE_TARGET_ITEMS',
  'HERALD_DURABILITY',
  'HERALD_QUEUE_NAME',
  'HERALD_QUEUE_PREFIX',
  'HERALD_QUEUE_PARTITIONS',
  'HERALD_PUBSUB_KEY',
  'HERALD_PUBSUB_MODE',
  'HERALD_REDIS_CLUSTER_NODES',
  'HERALD_REDIS_WAIT_REPLICAS',
  'HERALD_INBOX_PREFIX',
  'HERALD_INBOX_MAX_LENGTH',
  'HERALD_INBOX_MAX_AGE_MS',
  'HERALD_INBOX_RECORD_GRACE_MS',
  'HERALD_CORS_ORIGIN',
  'HERALD_ALLOW_POLLING',
  'HERALD_MAX_CONNECTIONS_PER_USER',
  'HERALD_PING_INTERVAL_MS',
  'HERALD_PING_TIMEOUT_MS',
  'HERALD_GAP_WAIT_MS',
  'HERALD_REPLAY_PAGE',
  'HERALD_INSTANCE_ID',
  'HERALD_WORKER_CONCURRENCY',
  'HERALD_WORKER_PARTITIONS',
  'HERALD_WORKER_LOCK_MS',
  'HERALD_WORKER_STALLED_INTERVAL_MS',
  'HERALD_WEBHOOK_ALLOW_PRIVATE',
  'HERALD_VAPID_PUBLIC_KEY',
  'HERALD_VAPID_PRIVATE_KEY',
  'HERALD_VAPID_SUBJECT',
  'HERALD_PUSH_ALLOW_PRIVATE',
  'HERALD_PUSH_TIMEOUT_MS',
  'HERALD_WEBHOOK_ATTEMPTS',
  'HERALD_WEBHOOK_BACKOFF_MS',
  'HERALD_WEBHOOK_TIMEOUT_MS',
  'HERALD_WEBHOOK_PARK_AFTER',
  'HERALD_WEBHOOK_CONCURRENCY',
  'HERALD_WEBHOOK_ENDPOINT_CONCURRENCY',
  'HERALD_WORKER_FANOUT_CONCURRENCY',
  'HERALD_WORKER_FANOUT_CHUNK',
  'HERALD_LOG_LEVEL',
  'HERALD_LOG_FORMAT',
  'HERALD_GATEWAY_URL',
  'HERALD_REALTIME_URL',
  'HERALD_DEMO_API_KEY',
  'HERALD_DEMO_USER',
]);

/**
 * `HERALD_DEV_MODE`, as a TypeBox property to spread into the env schema of an app that holds secrets.
 *
 * @example
 * ```ts
 * const EnvSchema = Type.Object({ HERALD_JWT_SECRET: Type.Optional(Type.String()), ...DevModeEnv });
 * ```
 */
export const DevModeEnv = {
  HERALD_DEV_MODE: Type.Boolean({ default: false }),
};

/** Thrown when the environment does not describe a valid configuration; lists every problem. */
export class ConfigError extends Error {
  readonly code = ErrorCode.CONFIG;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ConfigError';
  }
}

/** Variables whose values never appear in a message (they are, or may contain, credentials). */
const CONFIDENTIAL = /SECRET|KEYS|ADMIN_KEY|PRIVATE_KEY|PASSWORD|REDIS_URL/;

/** A plain decimal number: what `Number()` reads, minus `Infinity`, hex, blanks and the like. */
const DECIMAL = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

interface AjvError {
  instancePath: string;
  message?: string;
  keyword?: string;
  params: Record<string, unknown>;
}

/**
 * Reads `schema`'s variables from `env` and nothing else (not `process.env`, not a `.env` file): an empty
 * variable counts as unset, numbers must be finite decimals (`Infinity`, `1e999`, `0x10` are refused),
 * and every problem, with `problems` found by the caller (e.g. {@link resolveSecrets}), is named in one
 * {@link ConfigError}. `HERALD_*` variables no Herald app reads come back as `warnings` (with a
 * suggestion for a near miss), for the app to log.
 *
 * @example
 * ```ts
 * const { values, warnings } = readEnv('worker', EnvSchema, process.env);
 * ```
 */
export function readEnv<S extends TObject>(
  app: string,
  schema: S,
  env: Readonly<Record<string, string | undefined>>,
  problems: readonly string[] = [],
): { values: Static<S>; warnings: string[] } {
  const properties = schema.properties as Record<string, { type?: unknown }>;
  const known = Object.keys(properties);
  const data: Record<string, string> = {};
  const found = [...problems];
  const notNumbers = new Set<string>();
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined || value === '' || !Object.hasOwn(properties, name)) continue;
    data[name] = value;
    const type = properties[name]?.type;
    if (
      (type === 'number' || type === 'integer') &&
      !(DECIMAL.test(value.trim()) && Number.isFinite(Number(value)))
    ) {
      notNumbers.add(name);
      found.push(`${name} must be a finite decimal number${shown(name, value)}`);
    }
  }
  const warnings = Object.keys(env)
    .filter((name) => name.startsWith('HERALD_') && env[name] !== undefined)
    .filter((name) => !known.includes(name) && !HERALD_VARIABLES.includes(name))
    .map((name) => {
      const near = nearest(name, [...new Set([...known, ...HERALD_VARIABLES])]);
      return `${name} is not a Herald setting and is ignored${near ? `: did you mean ${near}?` : ''}`;
    });

  let values: Static<S> | undefined;
  try {
    // env: false: env-schema otherwise merges process.env into `data` (its default), which is how an
    // empty HERALD_JWT_SECRET= from docker compose used to be validated. It also sets
    // additionalProperties: false on `schema`, which is what the schema means anyway.
    values = envSchema<Static<S>>({ schema, data, env: false, dotenv: false });
  } catch (error) {
    const errors = (error as { errors?: AjvError[] }).errors;
    if (!errors) throw error;
    found.push(
      ...describe(
        errors.filter((e) => !notNumbers.has(e.instancePath.slice(1))),
        data,
      ),
    );
  }
  if (found.length > 0 || values === undefined) {
    const lines = [...new Set(found)];
    const list = (items: readonly string[]) => items.map((line) => `  - ${line}`).join('\n');
    throw new ConfigError(
      `Invalid ${app} configuration (${lines.length} problem${lines.length === 1 ? '' : 's'}):\n${list(lines)}${
        warnings.length > 0
          ? `\nand ${warnings.length} warning${warnings.length === 1 ? '' : 's'}:\n${list(warnings)}`
          : ''
      }`,
    );
  }
  return { values, warnings };
}

/** What a variable whose value does not match its schema's `pattern` must be, said in words. */
const PATTERN_MESSAGES: Readonly<Record<string, string>> = {
  REDIS_URL: 'must be a redis:// or rediss:// URL with a host (redis://[:password@]host[:port][/db])',
  HERALD_REDIS_CLUSTER_NODES:
    'must be host:port pairs separated by commas, each port 1 to 65535 (e.g. 10.0.0.1:7000,10.0.0.2:7000)',
};

/** One line per variable from ajv's errors; a union of literals reads "must be one of: a, b". */
function describe(errors: readonly AjvError[], data: Record<string, string>): string[] {
  const byName = new Map<string, AjvError[]>();
  for (const error of errors) {
    const name = error.instancePath.replace(/^\//, '') || String(error.params.missingProperty ?? 'env');
    byName.set(name, [...(byName.get(name) ?? []), error]);
  }
  return [...byName].map(([name, list]) => {
    const allowed = list.map((error) => error.params.allowedValue).filter((value) => value !== undefined);
    const message =
      allowed.length > 0
        ? `must be one of: ${allowed.join(', ')}`
        : [
            ...new Set(
              list.map((error) =>
                error.keyword === 'pattern' && PATTERN_MESSAGES[name] !== undefined
                  ? PATTERN_MESSAGES[name]
                  : (error.message ?? 'is invalid'),
              ),
            ),
          ].join(', ');
    return `${name} ${message}${shown(name, data[name])}`;
  });
}

function shown(name: string, value: string | undefined): string {
  if (value === undefined) return '';
  return CONFIDENTIAL.test(name) ? ' (value not shown)' : ` (got ${JSON.stringify(value)})`;
}

/** The closest of `names` to `name` within a few edits, if any. */
function nearest(name: string, names: readonly string[]): string | undefined {
  let best: { name: string; distance: number } | undefined;
  for (const candidate of names) {
    const distance = editDistance(name, candidate);
    if (distance <= 3 && (best === undefined || distance < best.distance))
      best = { name: candidate, distance };
  }
  return best?.name;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1);
      current.push(Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, substitution));
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}

/**
 * `url` with its password (if any) replaced by `***`, for messages and logs: `REDIS_URL` carries
 * Redis's password (`redis://:<password>@host:6379`).
 *
 * @example
 * ```ts
 * withoutPassword('redis://:s3cret@redis:6379'); // 'redis://:***@redis:6379'
 * ```
 */
export function withoutPassword(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password === '') return url;
    parsed.password = '***';
    return parsed.toString();
  } catch {
    return url.replace(/\/\/[^@/]*@/, '//***@');
  }
}
