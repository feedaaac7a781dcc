import type { PreparedCall } from './call.js';
import type { Policy } from './options.js';
import { slotAllowed, slotResetAfterMs, slotRetryAfterMs } from './reply.js';
import type { PolicyCounters, RateLimitResult } from './result.js';

/**
 * How long an entry answers at most, ms, whatever its `retryAfterMs`: a bucket refilled elsewhere (an
 * operator's `herald limits reset` runs in another process) is asked again within this, at the cost of
 * one Redis call per denied bucket per second under a flood.
 */
export const DENY_CACHE_MAX_MS = 1000;

interface DenyEntry {
  /** Local clock (ms) until which calls with at least `cost` are denied (what Redis said). */
  until: number;
  /** Local clock (ms) after which the entry is not used (at most DENY_CACHE_MAX_MS after it was made). */
  expires: number;
  cost: number;
  retryAfterMs: number;
  resetAfterMs: number;
}

/**
 * The local deny cache: buckets Redis denied, refused here without a Redis call until their
 * `retryAfterMs` passes. A Map bounded to `max` entries that forgets the oldest insertion first. Not an
 * LRU on purpose: a hit (the hot path of a flood) is one Map lookup, where lru-cache's bookkeeping made
 * a quarter of the denied call's cost; an entry ends at its `until` anyway, and a key denied again by
 * Redis is re-inserted as the newest.
 */
export class DenyCache {
  readonly #entries = new Map<string, DenyEntry>();
  readonly #max: number;
  readonly #policies: readonly Policy[];
  /** The limiter's counters: a hit counts as denied locally on the denying policy. */
  readonly #counters: PolicyCounters[];
  /**
   * Whether a bucket refills linearly (token bucket, GCRA): a call dearer than the denied one is then
   * denied for longer, by its extra cost over the rate. Else (windows) only the same cost is answered.
   */
  readonly #linear: boolean;

  constructor(max: number, policies: readonly Policy[], counters: PolicyCounters[], linear = true) {
    this.#max = Math.max(1, max);
    this.#policies = policies;
    this.#counters = counters;
    this.#linear = linear;
  }

  /** A denied result (`source: 'deny-cache'`) when one of the call's buckets is still denied for its cost. */
  check(call: PreparedCall, now: number): RateLimitResult | undefined {
    for (let s = 0; s < call.keys.length; s++) {
      const entry = this.#entries.get(call.keys[s]!);
      if (entry === undefined) continue;
      if (now >= entry.until || now >= entry.expires) {
        this.#entries.delete(call.keys[s]!);
        continue;
      }
      const cost = call.costs[s]!;
      if (cost < entry.cost || (cost > entry.cost && !this.#linear)) continue;
      const p = call.slotPolicy[s]!;
      const policy = this.#policies[p]!;
      this.#counters[p]!.deniedLocally++;
      // The bucket has the denied call's cost at `until`; a dearer call waits for its extra cost too.
      const extraMs = ((cost - entry.cost) * 1000) / policy.ratePerSecond;
      const retryAfterMs = Math.max(1, Math.ceil(entry.until - now + extraMs));
      const resetAfterMs = Math.max(
        retryAfterMs,
        Math.ceil(entry.resetAfterMs - (entry.retryAfterMs - (entry.until - now))),
      );
      const id = call.ids[s]!;
      return {
        allowed: false,
        limit: policy.capacity,
        remaining: 0,
        retryAfterMs,
        resetAfterMs,
        policy: policy.name,
        deniedId: id,
        policies: [
          {
            policy: policy.name,
            id,
            allowed: false,
            limit: policy.capacity,
            remaining: 0,
            retryAfterMs,
            resetAfterMs,
          },
        ],
        source: 'deny-cache',
      };
    }
    return undefined;
  }

  /** Remembers every bucket of a denied `reply`, from `started` (the local clock when the call began). */
  remember(call: PreparedCall, reply: readonly number[], started: number): void {
    // Counted from when the call started: Redis decided later, so `started + retryAfterMs` is never
    // after the moment the bucket really has the cost again.
    for (let s = 0; s < call.keys.length; s++) {
      if (slotAllowed(reply, s)) continue;
      this.#set(call.keys[s]!, {
        until: started + slotRetryAfterMs(reply, s),
        expires: started + DENY_CACHE_MAX_MS,
        cost: call.costs[s]!,
        retryAfterMs: slotRetryAfterMs(reply, s),
        resetAfterMs: slotResetAfterMs(reply, s),
      });
    }
  }

  /** Forgets `key` (after a reset). */
  delete(key: string): void {
    this.#entries.delete(key);
  }

  #set(key: string, entry: DenyEntry): void {
    this.#entries.delete(key);
    this.#entries.set(key, entry);
    if (this.#entries.size > this.#max) {
      const oldest = this.#entries.keys().next();
      if (oldest.done !== true) this.#entries.delete(oldest.value);
    }
  }
}
