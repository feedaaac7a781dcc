import { CostExceedsCapacityError, RateLimiterError, RateLimiterErrorCode } from './errors.js';
import { bucketKey } from './keys.js';
import type { ResolvedOptions } from './options.js';

/**
 * Ids of one call: one string for every policy, or per policy name one id or several (an array: each
 * id is a bucket of that policy, all decided in the same all-or-nothing call; an id given twice is one
 * bucket charged the sum of its costs).
 *
 * @example
 * ```ts
 * const ids: RateLimitKey = { apiKey: 'key-7', recipient: 'user-42' };
 * const batch: RateLimitKey = { sender: 'key-7', recipient: ['user-1', 'user-2', 'user-1'] };
 * ```
 */
export type RateLimitKey = string | Readonly<Record<string, string | readonly string[]>>;

/**
 * Cost of one call: one number for every id of every policy, or per policy name a number (for each of
 * its ids) or an array paired index by index with that policy's array of ids. A missing name costs 1.
 *
 * @example
 * ```ts
 * const cost: RateLimitCost = { apiKey: 1, recipient: 3 };
 * const batchCost: RateLimitCost = { sender: 3, recipient: [1, 1, 1] }; // or recipient: 1
 * ```
 */
export type RateLimitCost = number | Readonly<Record<string, number | readonly number[]>>;

/** A call expanded to slots: one bucket each (slot s is `ids[s]` of policy `slotPolicy[s]`). Never mutated once built. */
export interface PreparedCall {
  readonly keys: readonly string[];
  readonly costs: readonly number[];
  readonly ids: readonly string[];
  /** Policy index of each slot; the options' `identity` when slot i is policy i (no arrays of ids). */
  readonly slotPolicy: readonly number[];
}

/**
 * Turns the ids and costs of a call into a {@link PreparedCall}: ids and costs checked, an id given twice
 * for one policy merged into one bucket, hash tags applied. Remembers the last call of each kind, so a
 * flood of one id (the hot path of a deny) reuses it.
 */
export class CallPreparer {
  readonly #options: ResolvedOptions;
  /** The last one-id call prepared (see `prepare`). */
  #lastPrepared: PreparedCall | undefined;
  /** The last `precheck`: its ids, cost and call. */
  #lastPrecheck: { of: Readonly<Record<string, string>>; cost: number; call: PreparedCall } | undefined;

  constructor(options: ResolvedOptions) {
    this.#options = options;
  }

  /** Expands a call to slots (one per bucket), merges an id given twice for one policy, checks costs. */
  prepare(key: RateLimitKey, cost: RateLimitCost): PreparedCall {
    const policies = this.#options.policies;
    const n = policies.length;
    if (typeof key === 'string' && typeof cost === 'number' && this.#options.hashTag === undefined) {
      // The common call (one id, one cost). The same id and cost as the previous call (a flood on a hot
      // key, denied from the deny cache) reuse its prepared call: nothing mutates one once built.
      const last = this.#lastPrepared;
      if (last !== undefined && last.ids[0] === key && last.costs[0] === cost) return last;
      checkCost(policies[0]!.name, cost);
      const keys: string[] = new Array(n);
      const costs: number[] = new Array(n);
      const ids: string[] = new Array(n);
      for (let p = 0; p < n; p++) {
        const policy = policies[p]!;
        if (cost > policy.capacity) throw new CostExceedsCapacityError(policy.name, cost, policy.capacity);
        keys[p] = bucketKey(policy.keyPrefix, key);
        costs[p] = cost;
        ids[p] = key;
      }
      const call: PreparedCall = { keys, costs, ids, slotPolicy: this.#options.identity };
      this.#lastPrepared = call;
      return call;
    }
    if (typeof key !== 'string') {
      for (const name of Object.keys(key)) {
        if (!this.#options.byName.has(name)) {
          throw new RateLimiterError(RateLimiterErrorCode.INVALID_KEY, `No policy is named "${name}".`);
        }
      }
    }
    const ids: string[] = [];
    const costs: number[] = [];
    let slotPolicy: number[] | undefined;
    for (let p = 0; p < n; p++) {
      const name = policies[p]!.name;
      const given = typeof key === 'string' ? key : key[name];
      const c = typeof cost === 'number' ? cost : (cost[name] ?? 1);
      if (typeof given === 'string') {
        if (typeof c !== 'number') {
          throw new RateLimiterError(
            RateLimiterErrorCode.INVALID_COST,
            `Policy "${name}" has one id but an array of costs: give a number.`,
          );
        }
        ids.push(given);
        costs.push(checkCost(name, c));
        slotPolicy?.push(p);
        continue;
      }
      if (!Array.isArray(given) || given.length === 0) {
        throw new RateLimiterError(
          RateLimiterErrorCode.INVALID_KEY,
          `No id for policy "${name}": give a string, or a non-empty array of strings, for every policy.`,
        );
      }
      if (typeof c !== 'number' && (!Array.isArray(c) || c.length !== given.length)) {
        throw new RateLimiterError(
          RateLimiterErrorCode.INVALID_COST,
          `Policy "${name}" has ${given.length} ids: give a number, or an array of ${given.length} numbers.`,
        );
      }
      if (slotPolicy === undefined) slotPolicy = Array.from({ length: ids.length }, (_, i) => i);
      // One bucket per distinct id: the script would otherwise refill and write the same key twice and
      // check each cost alone (2 calls of cost 1 on a bucket with 1 token would both pass).
      const seen = given.length > 1 ? new Map<string, number>() : undefined;
      for (let j = 0; j < given.length; j++) {
        const id: unknown = given[j];
        if (typeof id !== 'string') {
          throw new RateLimiterError(
            RateLimiterErrorCode.INVALID_KEY,
            `Id ${j} of policy "${name}" is not a string.`,
          );
        }
        const cj = checkCost(name, typeof c === 'number' ? c : (c as readonly number[])[j]);
        const slot = seen?.get(id);
        if (slot !== undefined) {
          costs[slot]! += cj;
          continue;
        }
        seen?.set(id, ids.length);
        ids.push(id);
        costs.push(cj);
        slotPolicy.push(p);
      }
    }
    const slots = slotPolicy ?? this.#options.identity;
    for (let s = 0; s < costs.length; s++) {
      const policy = policies[slots[s]!]!;
      if (costs[s]! > policy.capacity)
        throw new CostExceedsCapacityError(policy.name, costs[s]!, policy.capacity);
    }

    let tag: string | undefined;
    if (this.#options.hashTag !== undefined) {
      tag =
        typeof this.#options.hashTag === 'string'
          ? this.#options.hashTag
          : this.#options.hashTag(this.#tagIds(key));
    } else if (this.#options.isCluster && ids.length > 1 && ids.some((id) => id !== ids[0])) {
      throw new RateLimiterError(
        RateLimiterErrorCode.CROSS_SLOT,
        'On Redis Cluster, the keys of one call must share a slot: set the `hashTag` option (see the README).',
      );
    }
    const keys: string[] = new Array(ids.length);
    for (let s = 0; s < ids.length; s++) keys[s] = bucketKey(policies[slots[s]!]!.keyPrefix, ids[s]!, tag);
    return { keys, costs, ids, slotPolicy: slots };
  }

  /** The ids a `hashTag` function sees: every policy given one id (arrays are left out). */
  #tagIds(key: RateLimitKey): Readonly<Record<string, string>> {
    const ids: Record<string, string> = {};
    for (const policy of this.#options.policies) {
      const id = typeof key === 'string' ? key : key[policy.name];
      if (typeof id === 'string') ids[policy.name] = id;
    }
    return ids;
  }

  /**
   * The buckets of the policies named in `ids` (one id each), for a deny-cache lookup before the rest of
   * the call is known; undefined with a `hashTag` function (the keys depend on every id of the call).
   */
  precheck(ids: Readonly<Record<string, string>>, cost: number): PreparedCall | undefined {
    if (typeof this.#options.hashTag === 'function') return undefined;
    const last = this.#lastPrecheck;
    if (last !== undefined && last.cost === cost && sameIds(last.of, ids)) return last.call;
    const tag = this.#options.hashTag;
    const keys: string[] = [];
    const costs: number[] = [];
    const slotIds: string[] = [];
    const slotPolicy: number[] = [];
    for (const name in ids) {
      const index = this.#options.byName.get(name);
      const id = ids[name];
      if (index === undefined) {
        throw new RateLimiterError(RateLimiterErrorCode.INVALID_KEY, `No policy is named "${name}".`);
      }
      if (typeof id !== 'string') continue;
      keys.push(bucketKey(this.#options.policies[index]!.keyPrefix, id, tag));
      costs.push(cost);
      slotIds.push(id);
      slotPolicy.push(index);
    }
    const call: PreparedCall = { keys, costs, ids: slotIds, slotPolicy };
    this.#lastPrecheck = { of: { ...ids }, cost, call };
    return call;
  }
}

/** Whether `a` and `b` name the same ids for the same policies. */
function sameIds(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean {
  let n = 0;
  for (const name in b) {
    if (a[name] !== b[name]) return false;
    n++;
  }
  for (const _ in a) n--;
  return n === 0;
}

/** Validates one cost given for policy `name`. */
function checkCost(name: string, cost: unknown): number {
  if (typeof cost !== 'number' || !Number.isFinite(cost) || cost < 0) {
    throw new RateLimiterError(
      RateLimiterErrorCode.INVALID_COST,
      `Cost ${String(cost)} for policy "${name}" is not a finite number >= 0.`,
    );
  }
  return cost;
}
