import { CallPreparer, type PreparedCall, type RateLimitCost, type RateLimitKey } from './call.js';
import { DenyCache } from './deny-cache.js';
import { RateLimiterError, RateLimiterErrorCode, RateLimiterUnavailableError } from './errors.js';
import { Fallback } from './fallback.js';
import { bucketKey } from './keys.js';
import { type Policy, type RateLimiterOptions, type ResolvedOptions, resolveOptions } from './options.js';
import { checkReplyCode, deniedSlot, toResult } from './reply.js';
import type { PolicyCounters, RateLimitResult } from './result.js';
import { ScriptRunner } from './script-runner.js';
import { type Algorithm, LuaCode } from './scripts.js';
import { failureReason, Unavailable } from './transport.js';

export type { RateLimitCost, RateLimitKey } from './call.js';
export type {
  FailureMode,
  FailureOptions,
  Policy,
  PolicyOptions,
  RateLimiterLogger,
  RateLimiterOptions,
} from './options.js';
export type {
  DecisionSource,
  PolicyCounters,
  PolicyState,
  RateLimitDecision,
  RateLimitResult,
} from './result.js';

/**
 * A distributed rate limiter on Redis: one or more policies decided all or nothing in one Lua script
 * call, on Redis's clock, with a local deny cache and a failure mode for when Redis is away.
 *
 * @example
 * ```ts
 * import { Redis } from 'ioredis';
 * import { RateLimiter } from '@herald/rate-limiter';
 *
 * const redis = new Redis(process.env.REDIS_URL, { enableOfflineQueue: false, autoResendUnfulfilledCommands: false });
 * const limiter = new RateLimiter({
 *   redis,
 *   policies: [
 *     { name: 'apiKey', capacity: 100, ratePerSecond: 50 },
 *     { name: 'recipient', capacity: 10, ratePerSecond: 1 },
 *   ],
 *   failure: { mode: 'local', expectedInstances: 3 },
 * });
 * const result = await limiter.consume({ apiKey: 'key-7', recipient: 'user-42' });
 * if (!result.allowed) console.log(`denied by ${result.policy}, retry in ${result.retryAfterMs} ms`);
 * ```
 */
export class RateLimiter {
  /** The resolved policies, in order. */
  readonly policies: readonly Policy[];
  readonly algorithm: Algorithm;
  readonly #options: ResolvedOptions;
  readonly #calls: CallPreparer;
  readonly #runner: ScriptRunner;
  readonly #denyCache: DenyCache | undefined;
  readonly #fallback: Fallback;
  readonly #counters: PolicyCounters[];

  constructor(options: RateLimiterOptions) {
    const resolved = resolveOptions(options);
    this.#options = resolved;
    this.policies = resolved.policies;
    this.algorithm = resolved.algorithm;
    this.#counters = resolved.policies.map(() => ({ allowed: 0, denied: 0, deniedLocally: 0, fallback: 0 }));
    this.#calls = new CallPreparer(resolved);
    this.#runner = new ScriptRunner(resolved);
    this.#denyCache =
      resolved.denyCacheMax === undefined
        ? undefined
        : new DenyCache(
            resolved.denyCacheMax,
            resolved.policies,
            this.#counters,
            resolved.algorithm === 'token-bucket' || resolved.algorithm === 'gcra',
          );
    this.#fallback = new Fallback(resolved);
  }

  /**
   * The Redis key of `id`'s bucket for one policy (for operators; `peek` reads it for you).
   *
   * @example
   * ```ts
   * limiter.keyOf('recipient', 'user-42'); // 'ratelimit:recipient:{user-42}'
   * ```
   */
  keyOf(policy: string, id: string, tag?: string): string {
    const index = this.#options.byName.get(policy);
    const resolved = index === undefined ? undefined : this.policies[index];
    if (resolved === undefined) {
      throw new RateLimiterError(RateLimiterErrorCode.INVALID_KEY, `No policy is named "${policy}".`);
    }
    return bucketKey(resolved.keyPrefix, id, tag);
  }

  /**
   * Takes `cost` from every bucket of the call if every one has it, else from none.
   *
   * @param key one id for every policy, or per policy name one id or an array of ids (a batch: one
   *   bucket per id, all or nothing; an id given twice is one bucket charged the summed cost)
   * @param cost default 1; a number for every id, or per policy name a number (for each of its ids) or
   *   an array paired with its array of ids (missing names cost 1)
   * @throws {CostExceedsCapacityError} when a bucket's cost (summed over duplicates) exceeds its capacity
   * @throws {RateLimiterUnavailableError} when Redis is away and the failure mode is `throw`
   * @example
   * ```ts
   * const result = await limiter.consume({ apiKey: 'key-7', recipient: 'user-42' }, 1);
   * if (!result.allowed) reply.code(429).header('Retry-After', Math.ceil(result.retryAfterMs / 1000));
   * // A batch: one token per notification from the sender and from each recipient, all or nothing.
   * await limiter.consume({ sender: 'key-7', recipient: ['user-1', 'user-2', 'user-1'] }, { sender: 3, recipient: 1 });
   * ```
   */
  async consume(key: RateLimitKey, cost: RateLimitCost = 1): Promise<RateLimitResult> {
    const call = this.#calls.prepare(key, cost);
    const started = this.#options.now();
    const denyCache = this.#denyCache;

    if (denyCache !== undefined) {
      const cached = denyCache.check(call, started);
      if (cached !== undefined) return this.#emit(cached);
    }

    const reply = await this.#runner.send(call);
    if (reply instanceof Unavailable) {
      let result: RateLimitResult;
      try {
        result = this.#fallback.decide(call, reply);
      } catch (error) {
        this.#refundLate(call, reply);
        throw error;
      }
      // Refused by the failure mode: whatever the late script takes is given back.
      if (!result.allowed) this.#refundLate(call, reply);
      for (const counters of this.#counters) counters.fallback++;
      return this.#emit(result);
    }
    checkReplyCode(reply, call, this.#options);
    const result = toResult(call, reply, 'redis', this.#options);
    if (!result.allowed) {
      this.#counters[call.slotPolicy[deniedSlot(reply)]!]!.denied++;
      denyCache?.remember(call, reply, started);
    } else {
      for (const counters of this.#counters) counters.allowed++;
    }
    return this.#emit(result);
  }

  /**
   * The local deny cache's answer for some of a call's ids, without Redis and without consuming: a
   * denied result (`source: 'deny-cache'`, counted as denied locally) when one of `ids` is still denied
   * for `cost`, else `undefined` (which promises nothing: `consume` decides). For ids known before the
   * rest of the request, e.g. the API key before the body is read: a flood from a denied caller is
   * refused before any other work. Policies left out of `ids` are not looked at.
   *
   * @example
   * ```ts
   * const denied = limiter.deniedLocally({ sender: apiKeyId });
   * if (denied) return reply.code(429).header('Retry-After', Math.ceil(denied.retryAfterMs / 1000)).send();
   * ```
   */
  deniedLocally(ids: Readonly<Record<string, string>>, cost = 1): RateLimitResult | undefined {
    if (this.#denyCache === undefined) return undefined;
    const call = this.#calls.precheck(ids, cost);
    const cached = call === undefined ? undefined : this.#denyCache.check(call, this.#options.now());
    return cached === undefined ? undefined : this.#emit(cached);
  }

  /**
   * Every policy's state for `key` without consuming (bypasses the deny cache; an operator's view).
   *
   * @throws {RateLimiterUnavailableError} when Redis is away, whatever the failure mode
   * @example
   * ```ts
   * const { policies } = await limiter.peek({ apiKey: 'key-7', recipient: 'user-42' });
   * ```
   */
  async peek(key: RateLimitKey): Promise<RateLimitResult> {
    const call = this.#calls.prepare(key, 0);
    const reply = await this.#runner.send(call);
    if (reply instanceof Unavailable)
      throw new RateLimiterUnavailableError(reply.reason, { cause: reply.cause });
    checkReplyCode(reply, call, this.#options);
    return toResult(call, reply, 'redis', this.#options);
  }

  /**
   * Deletes `key`'s buckets (every policy, every id) so they are full again, and forgets them in this
   * process's deny cache (other processes keep theirs until their `retryAfterMs` passes).
   *
   * @throws {RateLimiterUnavailableError} when Redis is away
   * @example
   * ```ts
   * await limiter.reset('user-42');
   * ```
   */
  async reset(key: RateLimitKey): Promise<void> {
    const { keys } = this.#calls.prepare(key, 0);
    for (const k of keys) {
      this.#denyCache?.delete(k);
      this.#fallback.forget(k);
    }
    try {
      await this.#runner.del(keys);
    } catch (error) {
      throw new RateLimiterUnavailableError(failureReason(error), { cause: error });
    }
  }

  /**
   * A snapshot of the counters per policy name (allowed / denied / denied locally / fallback).
   *
   * @example
   * ```ts
   * for (const [policy, c] of Object.entries(limiter.metrics())) gauge.set({ policy }, c.denied);
   * ```
   */
  metrics(): Record<string, PolicyCounters> {
    const snapshot: Record<string, PolicyCounters> = {};
    this.policies.forEach((policy, index) => {
      snapshot[policy.name] = { ...this.#counters[index]! };
    });
    return snapshot;
  }

  /**
   * A call that timed out may still run once Redis answers, and take its cost for a request the failure
   * mode refused (nothing accepted): a 0.6 s stall took a user's whole burst for the 100 s its refill
   * lasts. When its late reply says it took (allowed), the cost is given back (token bucket, GCRA).
   */
  #refundLate(call: PreparedCall, unavailable: Unavailable): void {
    const late = unavailable.late;
    if (late === undefined || call.costs.every((cost) => cost === 0)) return;
    late
      .then((reply) => (reply[0] === LuaCode.Allowed ? this.#runner.refund(call) : false))
      .catch((error: unknown) => {
        this.#options.logger?.warn(
          { err: error, keys: call.keys.length },
          'rate limiter: could not give back what a timed-out call took',
        );
      });
  }

  #emit(result: RateLimitResult): RateLimitResult {
    this.#options.onDecision?.(result);
    return result;
  }
}
