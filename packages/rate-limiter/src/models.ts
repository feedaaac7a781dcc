/**
 * Pure TypeScript models of the Lua scripts, operation for operation (the same IEEE-754 doubles in the
 * same order), so that the property tests can demand identical answers. The token-bucket model also
 * serves as the in-process bucket of the `local` failure mode.
 */

/** A token bucket's state: `tokens` (float) at `ts` (µs). */
export interface TokenBucketState {
  tokens: number;
  ts: number;
}

/** One policy's answer, as the scripts give it. */
export interface ModelAnswer {
  allowed: boolean;
  remaining: number;
  retryAfterMs: number;
  resetAfterMs: number;
}

/**
 * Refills `state` (or a new full bucket) to `now` (µs), the way `token-bucket-n.lua` does.
 *
 * @example
 * ```ts
 * const refilled = refillTokenBucket(undefined, 1_000_000, 10, 5); // { tokens: 10, ts: 1_000_000 }
 * ```
 */
export function refillTokenBucket(
  state: TokenBucketState | undefined,
  now: number,
  capacity: number,
  rate: number,
): TokenBucketState {
  let tokens = state?.tokens ?? capacity;
  let ts = state?.ts ?? now;
  if (now > ts) {
    tokens = Math.min(capacity, tokens + ((now - ts) * rate) / 1000000);
    ts = now;
  }
  return { tokens, ts };
}

/**
 * One token-bucket call for one policy: the new state (undefined when nothing is written) and the answer.
 *
 * @example
 * ```ts
 * let state: TokenBucketState | undefined;
 * const step = tokenBucketStep(state, 1_000_000, 10, 5, 1);
 * state = step.state ?? state;
 * ```
 */
export function tokenBucketStep(
  state: TokenBucketState | undefined,
  now: number,
  capacity: number,
  rate: number,
  cost: number,
): { state: TokenBucketState | undefined; answer: ModelAnswer } {
  const refilled = refillTokenBucket(state, now, capacity, rate);
  const allowed = refilled.tokens >= cost;
  let tokens = refilled.tokens;
  let written: TokenBucketState | undefined;
  if (allowed && cost > 0) {
    tokens -= cost;
    written = { tokens, ts: refilled.ts };
  }
  return {
    state: written,
    answer: {
      allowed,
      remaining: Math.floor(tokens),
      retryAfterMs: allowed ? 0 : Math.ceil(((cost - refilled.tokens) / rate) * 1000),
      resetAfterMs: Math.ceil(((capacity - tokens) / rate) * 1000),
    },
  };
}

/**
 * One GCRA call for one policy, the way `gcra-n.lua` does it: `tat` is the stored theoretical arrival
 * time (µs) or undefined; the new TAT is undefined when nothing is written.
 *
 * @example
 * ```ts
 * const { tat, answer } = gcraStep(undefined, 1_000_000, 10, 5, 1);
 * ```
 */
export function gcraStep(
  storedTat: number | undefined,
  now: number,
  capacity: number,
  rate: number,
  cost: number,
): { tat: number | undefined; answer: ModelAnswer } {
  const interval = 1000000 / rate;
  const tolerance = capacity * interval;
  let tat = storedTat === undefined || storedTat < now ? now : storedTat;
  const newTat = tat + cost * interval;
  const allowAt = newTat - tolerance;
  const allowed = allowAt <= now;
  let written: number | undefined;
  if (allowed && newTat > tat) {
    tat = newTat;
    written = tat;
  }
  return {
    tat: written,
    answer: {
      allowed,
      remaining: Math.floor((tolerance - (tat - now)) / interval),
      retryAfterMs: allowed ? 0 : Math.ceil((allowAt - now) / 1000),
      resetAfterMs: Math.ceil((tat - now) / 1000),
    },
  };
}
