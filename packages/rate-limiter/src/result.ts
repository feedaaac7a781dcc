import type { FailureReason } from './errors.js';
import type { FailureMode, Policy } from './options.js';

/**
 * The state of one policy in a decision.
 *
 * @example
 * ```ts
 * const { policies } = await limiter.consume({ apiKey: 'k', recipient: 'u' });
 * for (const state of policies) console.log(state.policy, state.remaining);
 * ```
 */
export interface PolicyState {
  policy: string;
  /**
   * The id whose bucket this state describes. A policy given several ids reports one of them: the
   * bucket that denied (the longest wait) or, when all allow, the one with the fewest units left.
   */
  id?: string;
  /** Whether this policy alone would allow the call (every one of its ids). */
  allowed: boolean;
  /** The policy's capacity. */
  limit: number;
  /** Whole units left (after this call when it was allowed). */
  remaining: number;
  /** Milliseconds until this policy has the call's cost; 0 when it has it now. */
  retryAfterMs: number;
  /** Milliseconds until this policy's bucket is full again. */
  resetAfterMs: number;
}

/**
 * The outcome of one `consume` call, for the policy it names.
 *
 * @example
 * ```ts
 * const { allowed, retryAfterMs }: RateLimitDecision = await limiter.consume('user-42');
 * ```
 */
export interface RateLimitDecision {
  allowed: boolean;
  /** Capacity of the policy named by `policy` in a {@link RateLimitResult}. */
  limit: number;
  /** Whole units left in that policy. */
  remaining: number;
  /** When denied: milliseconds until every policy has the cost. 0 when allowed. */
  retryAfterMs: number;
  /** Milliseconds until that policy is full again. */
  resetAfterMs: number;
}

/**
 * Where a decision came from: Redis, the local deny cache, or the failure mode.
 *
 * @example
 * ```ts
 * if (result.source === 'fallback') metrics.fallbacks.inc();
 * ```
 */
export type DecisionSource = 'redis' | 'deny-cache' | 'fallback';

/**
 * A full decision: the top-level fields describe the denying policy (the one that needs the longest
 * wait) or, when allowed, the policy with the fewest units left.
 *
 * @example
 * ```ts
 * const result = await limiter.consume({ apiKey: 'k', recipient: 'u' });
 * if (!result.allowed) console.log(`denied by ${result.policy}`, result.policies);
 * ```
 */
export interface RateLimitResult extends RateLimitDecision {
  /** The denying policy, or when allowed the policy with the fewest units left. */
  policy: string;
  /** When denied (not by a `closed` fallback): the id whose bucket refused, in `policy`. */
  deniedId?: string;
  /**
   * One state per policy, in the limiter's order (a policy given several ids: its denying or most
   * constrained id, see {@link PolicyState.id}). For a `deny-cache` decision only the denying policy
   * (the others were not asked); for a `fallback` decision what the failure mode knows.
   */
  policies: PolicyState[];
  source: DecisionSource;
  /**
   * Set when `source` is `fallback`; `cause` is what Redis answered when `reason` is `error` (e.g. an
   * `OOM …` reply: a caller can tell its users that Redis is full rather than slow).
   */
  fallback?: { mode: Exclude<FailureMode, 'throw'>; reason: FailureReason; cause?: unknown };
}

/**
 * Counters of one policy since the limiter was created.
 *
 * @example
 * ```ts
 * const { allowed, denied, deniedLocally, fallback } = limiter.metrics().recipient!;
 * ```
 */
export interface PolicyCounters {
  /** Calls Redis allowed (counted on every policy of the call). */
  allowed: number;
  /** Calls Redis denied because of this policy. */
  denied: number;
  /** Calls the local deny cache denied because of this policy (no Redis call). */
  deniedLocally: number;
  /** Calls the failure mode decided (counted on every policy of the call). */
  fallback: number;
}

/** A call's buckets as the result builder needs them (see `PreparedCall`). */
interface Slots {
  readonly ids: readonly string[];
  readonly slotPolicy: readonly number[];
}

/**
 * One result from per-slot states (slot s: bucket `ids[s]` of policy `slotPolicy[s]`): per policy its
 * denying slot (the longest wait) or, when it allows, its slot with the fewest units left; on top the
 * denying slot `denySlot`, or when allowed the policy with the fewest units left. `identity` is the
 * slot map of a call with one id per policy (then `states` already is one per policy).
 */
export function decide(
  call: Slots,
  states: PolicyState[],
  allowed: boolean,
  denySlot: number,
  source: DecisionSource,
  policyCount: number,
  identity: readonly number[],
): RateLimitResult {
  let policies = states;
  if (call.slotPolicy !== identity) {
    policies = new Array(policyCount);
    for (let s = 0; s < states.length; s++) {
      const state = states[s]!;
      const p = call.slotPolicy[s]!;
      const held = policies[p];
      if (
        held === undefined ||
        (held.allowed
          ? !state.allowed || state.remaining < held.remaining
          : !state.allowed && state.retryAfterMs > held.retryAfterMs)
      ) {
        policies[p] = state;
      }
    }
  }
  let top: PolicyState;
  if (denySlot >= 0) {
    top = states[denySlot]!;
    // The denying slot is also its policy's state: make sure of it when waits tie.
    if (policies !== states) policies[call.slotPolicy[denySlot]!] = top;
  } else {
    top = policies[0]!;
    for (let i = 1; i < policies.length; i++) if (policies[i]!.remaining < top.remaining) top = policies[i]!;
  }
  const result: RateLimitResult = {
    allowed,
    limit: top.limit,
    remaining: top.remaining,
    retryAfterMs: allowed ? 0 : top.retryAfterMs,
    resetAfterMs: top.resetAfterMs,
    policy: top.policy,
    policies,
    source,
  };
  if (!allowed && top.id !== undefined) result.deniedId = top.id;
  return result;
}

/** A policy's state in a result, for bucket `id` of `policy`. */
export function policyState(
  policy: Policy,
  id: string,
  allowed: boolean,
  remaining: number,
  retryAfterMs: number,
  resetAfterMs: number,
): PolicyState {
  return { policy: policy.name, id, allowed, limit: policy.capacity, remaining, retryAfterMs, resetAfterMs };
}
