import { STATS_TTL_SECONDS, type StatsKeys } from '@herald/config';
import type { RateLimitResult } from '@herald/rate-limiter';
import type { ChainableCommander } from 'ioredis';
import { RECIPIENT_POLICY } from '../limits.js';

/** Recipients each gateway reports per second (its busiest): the dashboard shows the top 5 of all. */
export const HOT_RECIPIENTS_PER_SECOND = 20;

interface RecipientCount {
  decisions: number;
  denied: number;
}

/**
 * This gateway's rate-limit decisions of the current second, counted in memory (`record` is the
 * limiters' `onDecision`: a few increments, no Redis call) and written to Redis once per second by
 * `write`, where every gateway's counts add up (`HINCRBY`, `ZINCRBY`).
 */
export class TrafficTally {
  #allowed = 0;
  #denied = 0;
  #deniedBy = new Map<string, number>();
  #recipients = new Map<string, RecipientCount>();

  /** One decision (allowed or denied, from Redis, the deny cache or the failure mode). */
  record(result: RateLimitResult): void {
    if (result.allowed) this.#allowed++;
    else {
      this.#denied++;
      this.#deniedBy.set(result.policy, (this.#deniedBy.get(result.policy) ?? 0) + 1);
    }
    // A deny-cache decision names only the refusing policy (the sender): no recipient to count.
    for (const state of result.policies) {
      if (state.policy !== RECIPIENT_POLICY || state.id === undefined) continue;
      const count = this.#recipients.get(state.id);
      if (count === undefined)
        this.#recipients.set(state.id, { decisions: 1, denied: result.allowed ? 0 : 1 });
      else {
        count.decisions++;
        if (!result.allowed) count.denied++;
      }
    }
  }

  /**
   * Queues on `multi` the writes of everything counted since the last call, as second `second`, and
   * starts counting afresh. Answers false (and queues nothing) when there was no decision.
   */
  write(multi: ChainableCommander, keys: StatsKeys, second: number): boolean {
    if (this.#allowed === 0 && this.#denied === 0) return false;
    const traffic = keys.traffic(second);
    multi.hincrby(traffic, 'allowed', this.#allowed).hincrby(traffic, 'denied', this.#denied);
    for (const [policy, count] of this.#deniedBy) multi.hincrby(traffic, `denied:${policy}`, count);
    multi.expire(traffic, STATS_TTL_SECONDS);
    const busiest = busiestOf(this.#recipients);
    if (busiest.length > 0) {
      const hot = keys.hot(second);
      const hotDenied = keys.hotDenied(second);
      for (const [recipient, count] of busiest) {
        multi.zincrby(hot, count.decisions, recipient);
        if (count.denied > 0) multi.zincrby(hotDenied, count.denied, recipient);
      }
      multi.expire(hot, STATS_TTL_SECONDS).expire(hotDenied, STATS_TTL_SECONDS);
    }
    this.#allowed = 0;
    this.#denied = 0;
    this.#deniedBy = new Map();
    this.#recipients = new Map();
    return true;
  }
}

/** The {@link HOT_RECIPIENTS_PER_SECOND} most denied, then busiest, in one pass (no sort of them all). */
function busiestOf(recipients: ReadonlyMap<string, RecipientCount>): [string, RecipientCount][] {
  const top: [string, RecipientCount][] = [];
  const before = (a: RecipientCount, b: RecipientCount) =>
    a.denied > b.denied || (a.denied === b.denied && a.decisions > b.decisions);
  for (const entry of recipients) {
    if (top.length === HOT_RECIPIENTS_PER_SECOND && !before(entry[1], (top.at(-1) as typeof entry)[1]))
      continue;
    let at = top.length;
    while (at > 0 && before(entry[1], (top[at - 1] as typeof entry)[1])) at--;
    top.splice(at, 0, entry);
    if (top.length > HOT_RECIPIENTS_PER_SECOND) top.pop();
  }
  return top;
}
