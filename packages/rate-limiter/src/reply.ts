import type { PreparedCall } from './call.js';
import { CostExceedsCapacityError, RateLimiterError, RateLimiterErrorCode } from './errors.js';
import type { ResolvedOptions } from './options.js';
import {
  type DecisionSource,
  decide,
  type PolicyState,
  policyState,
  type RateLimitResult,
} from './result.js';
import { LuaCode } from './scripts.js';

/**
 * The one decoder of the scripts' reply (token-bucket-n.lua's header): `{ code, index }`, then per slot
 * (bucket) s four integers from `2 + 4 * s`: allowed (1|0), remaining, retryAfterMs, resetAfterMs.
 * The batch scripts answer these replies back to back, one per call.
 */
const HEAD = 2;
const PER_SLOT = 4;

/** Length of the reply of a call with `slots` buckets. */
export function replyLength(slots: number): number {
  return HEAD + PER_SLOT * slots;
}

/** Whether slot `s` allowed. */
export function slotAllowed(reply: readonly number[], s: number): boolean {
  return reply[HEAD + PER_SLOT * s] === 1;
}

/** Slot `s`'s wait (ms) until it has the call's cost. */
export function slotRetryAfterMs(reply: readonly number[], s: number): number {
  return reply[HEAD + PER_SLOT * s + 2]!;
}

/** Slot `s`'s time (ms) until its bucket is full. */
export function slotResetAfterMs(reply: readonly number[], s: number): number {
  return reply[HEAD + PER_SLOT * s + 3]!;
}

/** The denying slot of a denied reply (the script's 1-based index). */
export function deniedSlot(reply: readonly number[]): number {
  return reply[1]! - 1;
}

/**
 * Throws for an error code in `reply`: the script's own check of a cost over capacity, or a code this
 * version does not know.
 */
export function checkReplyCode(reply: readonly number[], call: PreparedCall, options: ResolvedOptions): void {
  const code = reply[0];
  if (code === LuaCode.Allowed || code === LuaCode.Denied) return;
  if (code === LuaCode.CostExceedsCapacity) {
    const s = deniedSlot(reply);
    const policy = options.policies[call.slotPolicy[s]!]!;
    throw new CostExceedsCapacityError(policy.name, call.costs[s]!, policy.capacity);
  }
  throw new RateLimiterError(
    RateLimiterErrorCode.UNEXPECTED_REPLY,
    `The rate-limit script answered code ${String(code)}: is another script registered under the same name?`,
  );
}

/** The result of a call from its (checked) reply. */
export function toResult(
  call: PreparedCall,
  reply: readonly number[],
  source: DecisionSource,
  options: ResolvedOptions,
): RateLimitResult {
  const slots = call.keys.length;
  const states: PolicyState[] = new Array(slots);
  for (let s = 0; s < slots; s++) {
    const at = HEAD + PER_SLOT * s;
    states[s] = policyState(
      options.policies[call.slotPolicy[s]!]!,
      call.ids[s]!,
      reply[at] === 1,
      reply[at + 1]!,
      reply[at + 2]!,
      reply[at + 3]!,
    );
  }
  const allowed = reply[0] === LuaCode.Allowed;
  return decide(
    call,
    states,
    allowed,
    allowed ? -1 : deniedSlot(reply),
    source,
    options.policies.length,
    options.identity,
  );
}
