import type { Cluster, Redis } from 'ioredis';
import { loadLua } from './lua.js';

/**
 * The algorithms a {@link RateLimiter} can run, each one Lua script over N policies.
 * - `token-bucket` (default): refills continuously at `ratePerSecond` up to `capacity`.
 * - `gcra`: one timestamp per key; a token bucket refilled one unit per round(1e6 / rate) whole µs.
 * - `fixed-window`: `capacity` per window of `capacity / ratePerSecond` s (up to 2x at a window edge).
 * - `sliding-window`: the fixed window smoothed by the previous window's weighted count.
 *
 * @example
 * ```ts
 * const algorithm: Algorithm = 'gcra';
 * ```
 */
export type Algorithm = 'token-bucket' | 'gcra' | 'fixed-window' | 'sliding-window';

/**
 * Codes in the first element of every script reply. Negative codes are errors; the one place that maps
 * them to TypeScript errors is `RateLimiter`.
 *
 * @example
 * ```ts
 * if (reply[0] === LuaCode.CostExceedsCapacity) throw new CostExceedsCapacityError(...);
 * ```
 */
export enum LuaCode {
  Allowed = 1,
  Denied = 0,
  CostExceedsCapacity = -1,
  InvalidArgument = -2,
}

interface ScriptFile {
  command: string;
  file: string;
}

/**
 * Lua file and ioredis command name of each algorithm: the N-key script, and where it exists a
 * single-key variant (same semantics and reply, no loops or tables) for calls with one bucket.
 */
const SCRIPTS: Readonly<
  Record<Algorithm, { n: ScriptFile; one?: ScriptFile; many?: ScriptFile; refund?: ScriptFile }>
> = {
  'token-bucket': {
    n: { command: 'heraldTokenBucket', file: 'token-bucket-n.lua' },
    one: { command: 'heraldTokenBucket1', file: 'token-bucket-1.lua' },
    many: { command: 'heraldTokenBucketM', file: 'token-bucket-m.lua' },
    refund: { command: 'heraldTokenBucketRefund', file: 'token-bucket-refund.lua' },
  },
  gcra: {
    n: { command: 'heraldGcra', file: 'gcra-n.lua' },
    one: { command: 'heraldGcra1', file: 'gcra-1.lua' },
    many: { command: 'heraldGcraM', file: 'gcra-m.lua' },
    refund: { command: 'heraldGcraRefund', file: 'gcra-refund.lua' },
  },
  'fixed-window': { n: { command: 'heraldFixedWindow', file: 'fixed-window-n.lua' } },
  'sliding-window': { n: { command: 'heraldSlidingWindow', file: 'sliding-window-n.lua' } },
};

function scriptFile(algorithm: Algorithm, keys?: number): ScriptFile {
  const scripts = SCRIPTS[algorithm];
  return keys === 1 && scripts.one !== undefined ? scripts.one : scripts.n;
}

const sources = new Map<string, string>();

/**
 * The Lua source of `algorithm`'s script (read once from beside this module): the N-key script, or with
 * `keys = 1` the script a one-bucket call runs (the single-key variant where the algorithm has one).
 *
 * @example
 * ```ts
 * const lua = scriptSource('token-bucket', 1); // e.g. for SCRIPT LOAD in a benchmark
 * ```
 */
export function scriptSource(algorithm: Algorithm, keys?: number): string {
  return loadScript(scriptFile(algorithm, keys).file);
}

/**
 * Registers `algorithm`'s batch script (M independent calls, each of any number of buckets, in one
 * script call), if it has one.
 */
export function defineBatchScript(redis: Redis | Cluster, algorithm: Algorithm): ScriptCall | undefined {
  const many = SCRIPTS[algorithm].many;
  return many === undefined ? undefined : defineFile(redis, many);
}

/** Registers `script`'s file on `redis` with `defineCommand` (once per client); the function that runs it. */
function defineFile(redis: Redis | Cluster, script: ScriptFile): ScriptCall {
  if (!(script.command in redis)) redis.defineCommand(script.command, { lua: loadScript(script.file) });
  const run = (redis as unknown as Record<string, ScriptCall>)[script.command];
  if (typeof run !== 'function') throw new Error(`ioredis did not define ${script.command}`);
  return run.bind(redis);
}

/**
 * Registers `algorithm`'s refund script (gives back what a call took: token-bucket-refund.lua,
 * gcra-refund.lua; the -n script's layout), if it has one (the window algorithms have none).
 */
export function defineRefundScript(redis: Redis | Cluster, algorithm: Algorithm): ScriptCall | undefined {
  const refund = SCRIPTS[algorithm].refund;
  return refund === undefined ? undefined : defineFile(redis, refund);
}

/**
 * The Lua source of `algorithm`'s batch script (M independent calls, each of any number of buckets), if
 * it has one. Its layout (token-bucket-m.lua's header): KEYS = every call's keys in order; ARGV = now,
 * TTL margin, then per call its number of buckets followed by capacity, rate and cost per bucket.
 *
 * @example
 * ```ts
 * const lua = batchScriptSource('token-bucket'); // token-bucket-m.lua
 * ```
 */
export function batchScriptSource(algorithm: Algorithm): string | undefined {
  const many = SCRIPTS[algorithm].many;
  return many === undefined ? undefined : loadScript(many.file);
}

function loadScript(file: string): string {
  let source = sources.get(file);
  if (source === undefined) {
    source = loadLua(file);
    sources.set(file, source);
  }
  return source;
}

/** A script call: `numkeys, ...keys, ...argv` → the flat integer reply. */
export type ScriptCall = (numKeys: number, ...args: (string | number)[]) => Promise<number[]>;

/**
 * Registers `algorithm`'s script on `redis` with `defineCommand` (EVALSHA, EVAL on NOSCRIPT) once per
 * client, and returns a function that runs it (`keys = 1`: the single-key variant, if any).
 */
export function defineScript(redis: Redis | Cluster, algorithm: Algorithm, keys?: number): ScriptCall {
  const { command } = scriptFile(algorithm, keys);
  if (!(command in redis)) {
    redis.defineCommand(command, { lua: scriptSource(algorithm, keys) });
  }
  const run = (redis as unknown as Record<string, ScriptCall>)[command];
  if (typeof run !== 'function') throw new Error(`ioredis did not define ${command}`);
  return run.bind(redis);
}
