import type { Cluster, Redis } from 'ioredis';
import { DEFAULT_FLUSH_AT, MAX_BATCH_CALLS } from './batcher.js';
import { RateLimiterError, RateLimiterErrorCode } from './errors.js';
import type { RateLimitResult } from './result.js';
import type { Algorithm } from './scripts.js';

/**
 * One limit: at most `capacity` at once, refilled at `ratePerSecond` (for the window algorithms:
 * `capacity` per window of `capacity / ratePerSecond` seconds).
 *
 * @example
 * ```ts
 * const perRecipient: PolicyOptions = { name: 'recipient', capacity: 10, ratePerSecond: 1 };
 * ```
 */
export interface PolicyOptions {
  /** Names the policy in decisions, metrics and the `RateLimit` headers. Unique within a limiter. */
  name: string;
  /** Burst: the most a bucket holds (the quota `q` of the `RateLimit-Policy` header). */
  capacity: number;
  /** Refill, in cost units per second. */
  ratePerSecond: number;
  /** Prefix of this policy's keys, without `{` or `}`. Default `<limiter keyPrefix><name>:`. */
  keyPrefix?: string;
}

/**
 * A policy as the limiter uses it: options resolved and frozen.
 *
 * @example
 * ```ts
 * for (const policy of limiter.policies) console.log(policy.name, policy.windowSeconds);
 * ```
 */
export interface Policy {
  readonly name: string;
  readonly capacity: number;
  readonly ratePerSecond: number;
  readonly keyPrefix: string;
  /** `capacity / ratePerSecond`: the time to refill fully (the window `w` of `RateLimit-Policy`). */
  readonly windowSeconds: number;
}

/**
 * What the limiter does when Redis fails or does not answer within `timeoutMs`:
 * - `closed`: deny (safe for abuse-sensitive endpoints);
 * - `open`: allow (availability first);
 * - `local`: an in-process token bucket per key at `capacity / expectedInstances` and
 *   `ratePerSecond / expectedInstances` (the fleet as a whole stays near the limit);
 * - `throw`: throw a {@link RateLimiterUnavailableError} (the caller answers 503).
 *
 * @example
 * ```ts
 * const mode: FailureMode = 'local';
 * ```
 */
export type FailureMode = 'closed' | 'open' | 'local' | 'throw';

/**
 * Failure handling of one limiter.
 *
 * @example
 * ```ts
 * const failure: FailureOptions = { mode: 'local', expectedInstances: 4, timeoutMs: 150 };
 * ```
 */
export interface FailureOptions {
  /** Default `closed`. */
  mode?: FailureMode;
  /**
   * Longest wait for Redis (connecting included) before the failure mode decides: more than 0, at most
   * 2^31 - 1 ms (Node's longest timer). Default 150 ms.
   */
  timeoutMs?: number;
  /** `local` only: how many instances share the limit. Default 1. */
  expectedInstances?: number;
  /** `closed` only: the `retryAfterMs` of a fallback deny, 0 or more. Default 1000 ms. */
  retryAfterMs?: number;
}

/**
 * A pino-compatible logger (Fastify's `app.log` fits). The limiter logs only when Redis becomes
 * unavailable and when it comes back.
 *
 * @example
 * ```ts
 * const logger: RateLimiterLogger = { warn: (details, message) => app.log.warn(details, message) };
 * ```
 */
export interface RateLimiterLogger {
  warn(details: Record<string, unknown>, message: string): void;
  info?(details: Record<string, unknown>, message: string): void;
}

/**
 * Settings of a {@link RateLimiter}.
 *
 * @example
 * ```ts
 * const options: RateLimiterOptions = {
 *   redis: new Redis(url, { enableOfflineQueue: false, autoResendUnfulfilledCommands: false }),
 *   policies: [{ name: 'user', capacity: 10, ratePerSecond: 10 }],
 * };
 * ```
 */
export interface RateLimiterOptions {
  /**
   * ioredis client (single node or Cluster). Recommended options: `enableOfflineQueue: false` and
   * `autoResendUnfulfilledCommands: false` (see the README: a consume must never be replayed late).
   */
  redis: Redis | Cluster;
  /** One or more policies, all checked in one atomic script call. */
  policies: readonly PolicyOptions[];
  /** Default `token-bucket`. */
  algorithm?: Algorithm;
  /** Prefix of every policy's default key prefix. Default `ratelimit:`. No `{` or `}`. */
  keyPrefix?: string;
  /**
   * Redis Cluster and several ids in one call: the hash tag every key of the call shares. A string puts
   * all of this limiter's keys in one slot; a function of the call's ids (e.g. `(ids) => ids.apiKey`)
   * spreads them, but then every other policy's bucket is per (tag, id). See the README.
   * The function sees the policies given one id (a string); policies given an array of ids are left
   * out, so tag by a single-id policy (e.g. the sender of a batch).
   * Default: each key is tagged by its own id (single node, or one id per call).
   */
  hashTag?: string | ((ids: Readonly<Record<string, string>>) => string);
  /** Default `{ mode: 'closed', timeoutMs: 150 }`. */
  failure?: FailureOptions;
  /** In-process cache of denied keys (no Redis call until `retryAfterMs` passes). Default `{ max: 10_000 }`. */
  denyCache?: false | { max?: number };
  /** Added to every key's TTL beyond the time to refill fully: whole ms, 0 or more. Default 1000 ms. */
  ttlMarginMs?: number;
  /**
   * Single-node clients: send the script calls made in one tick of the event loop in one socket write
   * (the socket is corked until `process.nextTick`, so nothing waits beyond the current tick). Under
   * concurrency this about halves the Node CPU per decision (bench/limiter: ~20 → ~13 µs, the write
   * syscall per command was a third of it). Other commands written on the same client in that tick are
   * coalesced too. Default `true`; ignored for Redis Cluster.
   */
  coalesceWrites?: boolean;
  /**
   * Token bucket and GCRA: the calls of this limiter made in the same turn of the event
   * loop (one bucket or several each, e.g. sender + recipients) go to Redis in one script call
   * (token-bucket-m.lua / gcra-m.lua, up to 100 calls or 256 buckets each; a larger call goes alone): one EVALSHA, one
   * Redis `TIME` and one reply for all of them. Each call is still all or nothing on its own buckets and
   * exactly the N-key script's, taken in call order at one instant of Redis's clock (a later call sees
   * an earlier one's consumption). The batch leaves in `setImmediate`, with no timer: after the I/O
   * callbacks already due in this turn (concurrent HTTP requests are each their own callback; with
   * `process.nextTick` every batch had one call), or as soon as it holds `batchFlushAt` calls. Under
   * concurrency this cuts both Node's and Redis's work per decision (see bench/README.md). One timeout,
   * from when the batch leaves, covers it; if it fails, each of its calls gets the failure mode.
   * On Redis Cluster, one script call per hash slot: a limiter whose keys share one tag (`hashTag`, a
   * string) batches all its calls; calls of different ids without one go one per slot, as alone.
   * Default `true`; ignored for the window algorithms.
   */
  batchCalls?: boolean;
  /**
   * With `batchCalls`: a batch leaves as soon as it holds this many calls, without waiting for the end
   * of the turn, so Redis decides it while Node is still preparing the next one (two or three batches in
   * flight instead of Node and Redis taking turns on one: 110k → 180k decisions/s in bench/limiter).
   * Default 16.
   */
  batchFlushAt?: number;
  /**
   * With `batchCalls`: when a batch leaves, instead of `setImmediate`. Called with the batch's `send`
   * when its first call is queued; the batch leaves when `send` is called (a `send` of a batch that has
   * already left, full at `batchFlushAt`, does nothing), so an app can gather the calls of a longer
   * moment than one turn into one script call. Herald's gateway sends them when its envelope of
   * notifications would go (apps/gateway/src/envelopes.ts): one decision call per envelope. The
   * `failure.timeoutMs` still runs from when the batch leaves. `send` returns a promise that settles
   * once every script call of the batch has been answered (or failed), its calls resolved before it (on
   * Redis Cluster a batch may be several script calls, one per hash slot, answered at different times).
   *
   * @example
   * ```ts
   * new RateLimiter({ redis, policies, batchSchedule: (send) => setTimeout(send, 2) });
   * ```
   */
  batchSchedule?: (send: () => Promise<void>) => void;
  /** Tests only: a clock in milliseconds, sent to the script instead of Redis `TIME`. */
  clock?: () => number;
  logger?: RateLimiterLogger;
  /** Called after every `consume` decision (e.g. to feed Prometheus counters). Must not throw. */
  onDecision?: (result: RateLimitResult) => void;
}

/** {@link RateLimiterOptions} checked, with every default filled in, frozen: what the limiter's parts read. */
export interface ResolvedOptions {
  readonly redis: Redis | Cluster;
  /** The resolved policies, in order. */
  readonly policies: readonly Policy[];
  /** Policy index by name. */
  readonly byName: ReadonlyMap<string, number>;
  /** `[0, 1, …, policies - 1]`: the slot-to-policy map of a call that gives every policy one id. */
  readonly identity: readonly number[];
  readonly algorithm: Algorithm;
  readonly hashTag: RateLimiterOptions['hashTag'];
  readonly isCluster: boolean;
  /** `coalesceWrites`, off on Cluster. */
  readonly coalesceWrites: boolean;
  /** `batchCalls` (on Cluster: one batch per hash slot). */
  readonly batchCalls: boolean;
  readonly flushAt: number;
  /** `batchSchedule`, else `setImmediate`. */
  readonly schedule: (send: () => Promise<void>) => void;
  readonly mode: FailureMode;
  readonly timeoutMs: number;
  readonly instances: number;
  readonly fallbackRetryAfterMs: number;
  readonly ttlMarginMs: number;
  /** The injected clock (tests), sent to the scripts instead of Redis `TIME`. */
  readonly clock: (() => number) | undefined;
  /** The local clock in ms (deny cache, `local` failure mode): the injected one, else `performance.now`. */
  readonly now: () => number;
  /** Entries of the deny cache; undefined when it is off. */
  readonly denyCacheMax: number | undefined;
  readonly logger: RateLimiterLogger | undefined;
  readonly onDecision: ((result: RateLimitResult) => void) | undefined;
}

const DEFAULT_TIMEOUT_MS = 150;
/** The longest a Node timer can wait, ms (2^31 - 1): a longer one fires after 1 ms. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Checks `options` and fills in the defaults.
 *
 * @throws {RateLimiterError} `INVALID_OPTIONS`, naming the first problem
 * @example
 * ```ts
 * const resolved = resolveOptions({ redis, policies: [{ name: 'user', capacity: 10, ratePerSecond: 1 }] });
 * resolved.policies[0]!.keyPrefix; // 'ratelimit:user:'
 * ```
 */
export function resolveOptions(options: RateLimiterOptions): ResolvedOptions {
  const invalid = (message: string) =>
    new RateLimiterError(RateLimiterErrorCode.INVALID_OPTIONS, `RateLimiter: ${message}`);
  const prefix = options.keyPrefix ?? 'ratelimit:';
  if (/[{}]/.test(prefix))
    throw invalid('keyPrefix must not contain "{" or "}" (it would break the hash tag)');
  if (options.policies.length === 0) throw invalid('give at least one policy');
  const byName = new Map<string, number>();
  const policies = Object.freeze(
    options.policies.map((policy, index): Policy => {
      if (typeof policy.name !== 'string' || policy.name === '') throw invalid('every policy needs a name');
      if (byName.has(policy.name)) throw invalid(`two policies are named "${policy.name}"`);
      byName.set(policy.name, index);
      if (!(policy.capacity > 0 && Number.isFinite(policy.capacity))) {
        throw invalid(`policy "${policy.name}": capacity must be a positive number`);
      }
      if (!(policy.ratePerSecond > 0 && Number.isFinite(policy.ratePerSecond))) {
        throw invalid(`policy "${policy.name}": ratePerSecond must be a positive number`);
      }
      const keyPrefix = policy.keyPrefix ?? `${prefix}${policy.name}:`;
      if (/[{}]/.test(keyPrefix))
        throw invalid(`policy "${policy.name}": keyPrefix must not contain "{" or "}"`);
      return Object.freeze({
        name: policy.name,
        capacity: policy.capacity,
        ratePerSecond: policy.ratePerSecond,
        keyPrefix,
        windowSeconds: policy.capacity / policy.ratePerSecond,
      });
    }),
  );
  const timeoutMs = options.failure?.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const instances = options.failure?.expectedInstances ?? 1;
  // Node runs a timer longer than 2^31 - 1 ms after 1 ms: every call would time out at once.
  if (!(timeoutMs > 0 && timeoutMs <= MAX_TIMER_MS)) {
    throw invalid(`failure.timeoutMs must be more than 0 and at most ${MAX_TIMER_MS} ms (got ${timeoutMs})`);
  }
  if (!(instances >= 1)) throw invalid('failure.expectedInstances must be at least 1');
  const fallbackRetryAfterMs = options.failure?.retryAfterMs ?? 1000;
  if (!(fallbackRetryAfterMs >= 0 && Number.isFinite(fallbackRetryAfterMs))) {
    throw invalid(`failure.retryAfterMs must be a number of ms, 0 or more (got ${fallbackRetryAfterMs})`);
  }
  const batchFlushAt = options.batchFlushAt ?? DEFAULT_FLUSH_AT;
  if (typeof batchFlushAt !== 'number' || Number.isNaN(batchFlushAt)) {
    throw invalid(`batchFlushAt must be a number of calls (got ${batchFlushAt})`);
  }
  const denyCacheMax = options.denyCache === false ? undefined : (options.denyCache?.max ?? 10_000);
  if (denyCacheMax !== undefined && (typeof denyCacheMax !== 'number' || Number.isNaN(denyCacheMax))) {
    throw invalid(`denyCache.max must be a number of keys (got ${denyCacheMax})`);
  }
  const ttlMarginMs = options.ttlMarginMs ?? 1000;
  // Whole ms: Redis takes no fraction for a key's PX (every call would fail), and the scripts write it with %d.
  if (!Number.isSafeInteger(ttlMarginMs) || ttlMarginMs < 0) {
    throw invalid(`ttlMarginMs must be a whole number of ms, 0 or more (got ${ttlMarginMs})`);
  }
  const isCluster = (options.redis as { isCluster?: boolean }).isCluster === true;
  return Object.freeze({
    redis: options.redis,
    policies,
    byName,
    identity: Object.freeze(policies.map((_, i) => i)),
    algorithm: options.algorithm ?? 'token-bucket',
    hashTag: options.hashTag,
    isCluster,
    coalesceWrites: options.coalesceWrites !== false && !isCluster,
    batchCalls: options.batchCalls !== false,
    flushAt: Math.min(MAX_BATCH_CALLS, Math.max(1, Math.floor(batchFlushAt))),
    schedule: options.batchSchedule ?? setImmediate,
    mode: options.failure?.mode ?? 'closed',
    timeoutMs,
    instances,
    fallbackRetryAfterMs,
    ttlMarginMs,
    clock: options.clock,
    now: options.clock ?? (() => performance.now()),
    denyCacheMax,
    logger: options.logger,
    onDecision: options.onDecision,
  });
}
