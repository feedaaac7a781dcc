import { LRUCache } from 'lru-cache';
import type { PreparedCall } from './call.js';
import { RateLimiterUnavailableError } from './errors.js';
import { type LocalBucketState, localBucketStep } from './local-bucket.js';
import type { Policy, ResolvedOptions } from './options.js';
import { decide, type PolicyState, policyState, type RateLimitResult } from './result.js';
import type { Unavailable } from './transport.js';

/**
 * The failure modes: what a call gets when Redis failed or did not answer in time (`closed` denies,
 * `open` allows, `local` asks an in-process token bucket at 1/expectedInstances of the policy, `throw`
 * throws {@link RateLimiterUnavailableError}).
 */
export class Fallback {
  readonly #options: ResolvedOptions;
  /** The `local` mode's buckets, by Redis key (the 10,000 most recently used). */
  readonly #localBuckets = new LRUCache<string, LocalBucketState>({ max: 10_000 });

  constructor(options: ResolvedOptions) {
    this.#options = options;
  }

  /** The failure mode's result for `call`. */
  decide(call: PreparedCall, unavailable: Unavailable): RateLimitResult {
    const { mode, policies, identity, fallbackRetryAfterMs } = this.#options;
    if (mode === 'throw')
      throw new RateLimiterUnavailableError(unavailable.reason, { cause: unavailable.cause });
    const fallback: NonNullable<RateLimitResult['fallback']> = { mode, reason: unavailable.reason };
    if (unavailable.reason === 'error') fallback.cause = unavailable.cause;
    let result: RateLimitResult;
    if (mode === 'local') {
      result = this.#localDecision(call);
    } else {
      const allowed = mode === 'open';
      const states = call.keys.map((_, s): PolicyState => {
        const policy = policies[call.slotPolicy[s]!]!;
        return allowed
          ? policyState(policy, call.ids[s]!, true, Math.floor(policy.capacity - call.costs[s]!), 0, 0)
          : policyState(policy, call.ids[s]!, false, 0, fallbackRetryAfterMs, fallbackRetryAfterMs);
      });
      result = decide(call, states, allowed, allowed ? -1 : 0, 'fallback', policies.length, identity);
      // A `closed` deny is the failure mode's, not a bucket's.
      if (!allowed) delete result.deniedId;
    }
    result.fallback = fallback;
    return result;
  }

  /** Forgets `key`'s local bucket (after a reset). */
  forget(key: string): void {
    this.#localBuckets.delete(key);
  }

  /** The `local` failure mode: an in-process token bucket per key at 1/expectedInstances of the policy. */
  #localDecision(call: PreparedCall): RateLimitResult {
    const { policies, instances, identity } = this.#options;
    const nowUs = Math.round(this.#options.now() * 1000);
    const slots = call.keys.length;
    const share = (policy: Policy) =>
      [policy.capacity / instances, policy.ratePerSecond / instances] as const;
    const steps = call.keys.map((key, s) =>
      localBucketStep(
        this.#localBuckets.get(key),
        nowUs,
        ...share(policies[call.slotPolicy[s]!]!),
        call.costs[s]!,
      ),
    );
    const allowed = steps.every((step) => step.answer.allowed);
    let denySlot = -1;
    const states: PolicyState[] = new Array(slots);
    for (let s = 0; s < slots; s++) {
      const policy = policies[call.slotPolicy[s]!]!;
      const key = call.keys[s]!;
      const step = steps[s]!;
      if (allowed && step.state !== undefined) this.#localBuckets.set(key, step.state);
      // Denied as a whole: nothing was taken, so report the refilled bucket (a cost-0 step).
      const answer = allowed
        ? step.answer
        : localBucketStep(this.#localBuckets.get(key), nowUs, ...share(policy), 0).answer;
      if (!allowed && (denySlot < 0 || step.answer.retryAfterMs > steps[denySlot]!.answer.retryAfterMs)) {
        denySlot = s;
      }
      states[s] = policyState(
        policy,
        call.ids[s]!,
        step.answer.allowed,
        answer.remaining,
        step.answer.retryAfterMs,
        answer.resetAfterMs,
      );
    }
    return decide(call, states, allowed, denySlot, 'fallback', policies.length, identity);
  }
}
