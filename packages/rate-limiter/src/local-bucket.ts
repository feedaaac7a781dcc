/**
 * The in-process token bucket of the `local` failure mode: token-bucket-1.lua's arithmetic in
 * TypeScript (microtokens, so integer rates, capacities and costs stay exact), without Redis.
 */

/** A bucket's state: `tokens` in microtokens (1e-6 token) at `ts` (µs). */
export interface LocalBucketState {
  tokens: number;
  ts: number;
}

/** One policy's answer, as the scripts give it. */
export interface LocalBucketAnswer {
  allowed: boolean;
  remaining: number;
  retryAfterMs: number;
  resetAfterMs: number;
}

/**
 * One call on one bucket: the new state (undefined when nothing is written) and the answer.
 *
 * @example
 * ```ts
 * let state: LocalBucketState | undefined;
 * const step = localBucketStep(state, 1_000_000, 10, 5, 1); // answer.remaining === 9
 * state = step.state ?? state;
 * ```
 */
export function localBucketStep(
  state: LocalBucketState | undefined,
  now: number,
  capacity: number,
  rate: number,
  cost: number,
): { state: LocalBucketState | undefined; answer: LocalBucketAnswer } {
  const full = capacity * 1_000_000;
  const need = cost * 1_000_000;
  const perMs = rate * 1000;
  let tokens = state?.tokens ?? full;
  let ts = state?.ts ?? now;
  // rate tokens/s is rate microtokens/µs.
  if (now > ts) {
    tokens = Math.min(full, tokens + (now - ts) * rate);
    ts = now;
  }
  const allowed = tokens >= need;
  const retryAfterMs = allowed ? 0 : Math.ceil((need - tokens) / perMs);
  let written: LocalBucketState | undefined;
  if (allowed && cost > 0) {
    tokens -= need;
    written = { tokens, ts };
  }
  return {
    state: written,
    answer: {
      allowed,
      remaining: Math.floor(tokens / 1_000_000),
      retryAfterMs,
      resetAfterMs: Math.ceil((full - tokens) / perMs),
    },
  };
}
