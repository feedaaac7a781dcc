import { type ParseArgsConfig, parseArgs } from 'node:util';
import {
  createRedis,
  credentialsRefused,
  isOutOfMemory,
  OUT_OF_MEMORY_ADVICE,
  type RedisTarget,
  withoutPassword,
} from '@herald/config';
import type { Cluster, Redis } from 'ioredis';

/** Where a CLI command writes. */
export interface CliIo {
  out: (line: string) => void;
  err: (line: string) => void;
}

/**
 * A command's settings, read as the apps read them, or undefined once their problem was printed (exit 1):
 * the lines naming what is wrong, never a stack trace. A `HERALD_` variable that is no setting (a typo)
 * is warned of, with the nearest name, as the apps do at start.
 */
export function settingsFor<T extends { warnings?: readonly string[] }>(
  load: () => T,
  io: CliIo,
): T | undefined {
  let config: T;
  try {
    config = load();
  } catch (error) {
    if ((error as Error).name !== 'ConfigError') throw error;
    io.err((error as Error).message);
    return undefined;
  }
  for (const warning of config.warnings ?? []) {
    if (warning.includes('is not a Herald setting')) io.err(`warning: ${warning}`);
  }
  return config;
}

/** The Redis of an app's settings: `REDIS_URL`, or the Cluster of `HERALD_REDIS_CLUSTER_NODES`. */
export function redisTarget(config: {
  redisUrl: string;
  redisClusterNodes?: { host: string; port: number }[] | undefined;
}): RedisTarget {
  return { url: config.redisUrl, clusterNodes: config.redisClusterNodes };
}

/** How long connecting (TCP connection and ready check) may take before the CLI says so, ms. */
const CONNECT_DEADLINE_MS = 5000;
/** How long one command may go unanswered before it fails (exit 1, saying so), ms. */
export const COMMAND_TIMEOUT_MS = 15_000;

/** Why a Cluster connection ended before it was ready: the Cluster answers, but is down. */
const CLUSTER_DOWN = new Error(
  'it answers but does not serve every slot (CLUSTER INFO: cluster_state is not ok: is a master down?).',
);

/**
 * Connects to Redis (or the Redis Cluster) for a CLI command, or says why it cannot (and returns
 * undefined: exit code 1). Fails fast: no endless reconnecting to a Redis that is not there. The caller
 * disconnects.
 */
export async function connectForCli(target: RedisTarget, io: CliIo): Promise<Redis | Cluster | undefined> {
  // A command that gets no answer (a frozen Redis) fails after COMMAND_TIMEOUT_MS instead of holding
  // the CLI for good; connectTimeout covers only the TCP connection, not the ready check after it.
  const redis = createRedis(
    target,
    'plain',
    { maxRetriesPerRequest: 1, connectTimeout: 3000, lazyConnect: true, commandTimeout: COMMAND_TIMEOUT_MS },
    { clusterRetryStrategy: () => null, lazyConnect: true },
  );
  // Redis's own refusal (WRONGPASS, NOAUTH, a DB index it does not have), which `connect()` reports
  // only as "Connection is closed.".
  let refusal: string | undefined;
  redis.on('error', (error: Error) => {
    if (/^(WRONGPASS|NOAUTH|ERR)\b/.test(error.message)) refusal ??= error.message;
  });
  try {
    let deadline: NodeJS.Timeout | undefined;
    await new Promise<void>((resolve, reject) => {
      redis.connect().then(resolve, reject);
      // Connected but never ready (it accepted the connection and does not answer): said, not waited for.
      deadline = setTimeout(
        () =>
          reject(
            new Error(
              `it accepted the connection but did not answer within ${CONNECT_DEADLINE_MS / 1000} s (frozen or overloaded?)`,
            ),
          ),
        CONNECT_DEADLINE_MS,
      );
      // Never what keeps the CLI running: a refused connection exits at once (it waited out the 5 s).
      deadline.unref();
      // A Cluster that answers but does not serve every slot (a master down) fails ioredis's ready check
      // after the slot table was read: the connection ends, and `connect()` says only "Connection is
      // closed." (ioredis's own never settled: the CLI exited 13 without a word). Unreachable nodes end
      // it too, before any slot table, and `connect()` says why then.
      if (target.clusterNodes) {
        let answered = false;
        redis.once('refresh', () => {
          answered = true;
        });
        redis.once('end', () =>
          answered
            ? reject(CLUSTER_DOWN)
            : setImmediate(() => reject(new Error('None of startup nodes is available'))),
        );
      }
    }).finally(() => clearTimeout(deadline));
    return redis;
  } catch (error) {
    const where = target.clusterNodes
      ? `the Redis Cluster at ${target.clusterNodes.map((node) => `${node.host}:${node.port}`).join(',')}`
      : `Redis at ${withoutPassword(target.url)}`;
    const set = target.clusterNodes ? 'HERALD_REDIS_CLUSTER_NODES' : 'REDIS_URL';
    const refused = credentialsRefused(redis)?.message ?? refusal;
    io.err(
      error === CLUSTER_DOWN
        ? `Cannot use ${where}: ${CLUSTER_DOWN.message} Nothing was done: run it again once the Cluster is whole.`
        : refused !== undefined
          ? `Cannot use ${where}: ${refused.replace(/\.$/, '')}. Set ${set}.`
          : `Cannot reach ${where}: ${(error as Error).message.replace(/\.$/, '')}. Set ${set}.`,
    );
    redis.disconnect();
    return undefined;
  }
}

/** The environment a command reads its settings from (default `process.env`). */
export type Env = Record<string, string | undefined>;

/**
 * An area's `help`, or a missing or unknown command: prints `usage` and answers the exit code (0 for
 * help, 2 otherwise). Undefined for a known command.
 */
export function usageExit(
  command: string | undefined,
  known: readonly string[],
  usage: string,
  io: CliIo,
): number | undefined {
  if (command !== undefined && known.includes(command)) return undefined;
  const help = command === 'help' || command === '--help';
  (help ? io.out : io.err)(command === undefined || help ? usage : `unknown command "${command}"\n${usage}`);
  return help ? 0 : 2;
}

/**
 * `node:util` parseArgs (strict): the options and positionals, or undefined after printing the problem
 * with `usage` (the caller answers exit code 2).
 */
export function parseOptions<O extends Options>(
  args: string[],
  options: O,
  usage: string,
  io: CliIo,
  allowPositionals = false,
): { values: ParsedValues<O>; positionals: string[] } | undefined {
  try {
    const parsed = parseArgs({ args, options, strict: true, allowPositionals });
    return { values: parsed.values as ParsedValues<O>, positionals: parsed.positionals };
  } catch (error) {
    io.err(`${(error as Error).message}\n${usage}`);
    return undefined;
  }
}

/**
 * An area's command and its options ({@link usageExit}, then {@link parseOptions}), or the exit code when
 * there is nothing to run: 0 after help, 2 after printing what is wrong (unknown command, bad options).
 *
 * @example
 * ```ts
 * const parsed = parseCommand(args, ['peek', 'reset'], { user: { type: 'string' } }, USAGE, io);
 * if (typeof parsed === 'number') return parsed;
 * ```
 */
export function parseCommand<O extends Options, C extends string>(
  args: string[],
  known: readonly C[],
  options: O,
  usage: string,
  io: CliIo,
  allowPositionals = false,
): { command: C; values: ParsedValues<O>; positionals: string[] } | number {
  const [command, ...rest] = args;
  const exit = usageExit(command, known, usage, io);
  if (exit !== undefined || command === undefined) return exit ?? 2;
  const parsed = parseOptions(rest, options, usage, io, allowPositionals);
  // usageExit let through only a command of `known`.
  return parsed ? { command: command as C, ...parsed } : 2;
}

/**
 * Whether `command` got exactly `count` positional arguments (what it acts on: `what`, e.g. "one key
 * id"); prints what it got otherwise, so that a second id is refused rather than ignored after the
 * first was acted on (the caller answers exit code 2).
 */
export function takesPositionals(
  command: string,
  positionals: readonly string[],
  count: number,
  what: string,
  usage: string,
  io: CliIo,
): boolean {
  if (positionals.length === count) return true;
  const got = positionals.length === 0 ? 'none' : positionals.map((p) => `"${p}"`).join(' ');
  io.err(`${command} takes ${what}, got ${got}\n${usage}`);
  return false;
}

type Options = NonNullable<ParseArgsConfig['options']>;

type ParsedValues<O extends Options> = {
  [K in keyof O]?: O[K]['type'] extends 'boolean' ? boolean : string;
};

/**
 * The line an operator reads when Redis failed a command's work after connecting: a Redis at
 * `maxmemory` refusing writes says so and what to do; anything else names Redis and its error.
 */
export function redisFailure(target: RedisTarget, error: unknown): string {
  if (isOutOfMemory(error)) return `${OUT_OF_MEMORY_ADVICE}.`;
  const where = target.clusterNodes ? 'The Redis Cluster' : `Redis at ${withoutPassword(target.url)}`;
  return `${where} failed the command: ${(error as Error).message ?? error}`;
}

/**
 * Runs `work` with a fail-fast Redis connection (disconnected after); exit code 1, with one line saying
 * why ({@link redisFailure}), when Redis is unreachable or fails the work (never a stack trace).
 */
export async function withRedis(
  target: RedisTarget,
  io: CliIo,
  work: (redis: Redis | Cluster) => Promise<number>,
): Promise<number> {
  const redis = await connectForCli(target, io);
  if (!redis) return 1;
  try {
    return await work(redis);
  } catch (error) {
    io.err(redisFailure(target, error));
    return 1;
  } finally {
    redis.disconnect();
  }
}
