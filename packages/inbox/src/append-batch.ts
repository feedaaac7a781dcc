import calculateSlot from 'cluster-key-slot';
import type { Cluster, Redis } from 'ioredis';

/** Keys of one notification in `append-n.lua`, and arguments. */
export const APPEND_KEYS = 7;
export const APPEND_ARGS = 12;
/** Reply elements per notification. */
const APPEND_REPLY = 5;
/**
 * Most notifications in one script call: each is ~15–25 µs of Redis time, so a call holds Redis for
 * at most ~1.5 ms (a worker's turn rarely brings more: HERALD_WORKER_CONCURRENCY jobs of up to
 * HERALD_ENVELOPE_MAX_ITEMS are spread over the users' send order).
 */
export const MAX_APPEND_BATCH = 64;

/**
 * How long, ms, a worker's appends go one call per slot after a call across slots failed (a slot moved
 * during a resharding, or a Redis that refuses undeclared keys: then one failed call a minute, not one a
 * turn).
 */
export const CROSS_SLOT_BACKOFF_MS = 60_000;

/** One notification's part of an `append-n.lua` call. */
export interface AppendCall {
  keys: string[];
  args: (string | number)[];
}

type Reply = [number, string, number, number, string];
type Run = (...args: (string | number)[]) => Promise<unknown>;

interface Pending {
  call: AppendCall;
  /** Its keys' hash slot on Redis Cluster, else 0. */
  slot: number;
  resolve: (reply: Reply) => void;
  reject: (error: unknown) => void;
}

/**
 * Gathers the appends asked for in one event-loop turn into `append-n.lua` calls: one per
 * {@link MAX_APPEND_BATCH} notifications on a single Redis, and on Redis Cluster one per master (by the
 * client's slot table: the call declares the keys of one slot, which routes it, and the script reaches
 * the other slots of that master through its arguments; see append-n.lua). The worker's jobs of one turn
 * (an envelope's notifications, each in its user's send order) then cost Redis one script call and one
 * round trip per master, not one per user. A call that fails is run again notification by notification,
 * so that one notification Redis refuses (a key of the wrong type, or a slot that moved to another master
 * since the table was read) fails or goes alone; what the failed call had stored already is answered
 * `already-appended` (the append is idempotent). After a call across slots failed, calls carry one slot
 * each for {@link CROSS_SLOT_BACKOFF_MS}.
 */
export class AppendBatcher {
  readonly #run: Run;
  readonly #cluster: Cluster | undefined;
  #pending: Pending[] = [];
  #scheduled = false;
  /** Until when (Date.now()) calls on Redis Cluster carry one slot only (see CROSS_SLOT_BACKOFF_MS). */
  #oneSlotUntil = 0;

  constructor(redis: Redis | Cluster, run: Run) {
    this.#run = run;
    this.#cluster = redis.isCluster ? (redis as Cluster) : undefined;
  }

  /** Whether index keys (their own slot) may ride in the call: on a single Redis only. */
  get crossSlot(): boolean {
    return this.#cluster === undefined;
  }

  /** Runs `call` alone, now (a test's injected clock is one call's own). */
  async one(call: AppendCall, now: number | ''): Promise<Reply> {
    return (await this.#run(APPEND_KEYS, ...call.keys, 1, now, ...call.args)) as Reply;
  }

  /** Queues `call` for this turn's script calls. */
  enqueue(call: AppendCall): Promise<Reply> {
    const slot = this.#cluster === undefined ? 0 : calculateSlot(call.keys[0] ?? '');
    return new Promise<Reply>((resolve, reject) => {
      this.#pending.push({ call, slot, resolve, reject });
      if (!this.#scheduled) {
        this.#scheduled = true;
        setImmediate(this.#flush);
      }
    });
  }

  readonly #flush = (): void => {
    this.#scheduled = false;
    const pending = this.#pending;
    this.#pending = [];
    const groups = new Map<string | number, { items: Pending[]; after: Promise<void> }>();
    const bySlot = Date.now() < this.#oneSlotUntil;
    for (const item of pending) {
      // The master serving the slot, as the client last read it (the slot itself until it has).
      const node = (bySlot ? undefined : this.#cluster?.slots[item.slot]?.[0]) ?? item.slot;
      let group = groups.get(node);
      if (group === undefined || group.items.length >= MAX_APPEND_BATCH) {
        // A node's next call goes once the one before is answered (run again alone if it failed), so
        // that a user whose notifications it splits between them keeps their order.
        const after = group === undefined ? Promise.resolve() : this.#sendAfter(group.items, group.after);
        group = { items: [], after };
        groups.set(node, group);
      }
      group.items.push(item);
    }
    for (const group of groups.values()) void this.#sendAfter(group.items, group.after);
  };

  async #sendAfter(group: Pending[], after: Promise<void>): Promise<void> {
    await after;
    await this.#send(group);
  }

  async #send(group: Pending[]): Promise<void> {
    if (group.length === 1) {
      const [only] = group as [Pending];
      await this.one(only.call, '').then(only.resolve, only.reject);
      return;
    }
    // The first one's slot first (declared: it routes the call), the others after, each user's
    // notifications still in order (a user's are all in one slot).
    const slot = group[0]?.slot;
    const first = group.filter((item) => item.slot === slot);
    const rest = group.filter((item) => item.slot !== slot);
    const ordered = [...first, ...rest];
    const declared = first.flatMap((item) => item.call.keys);
    const others = rest.flatMap((item) => item.call.keys);
    const args = ordered.flatMap((item) => item.call.args);
    let replies: unknown[];
    try {
      replies = (await this.#run(
        declared.length,
        ...declared,
        ordered.length,
        '',
        ...args,
        ...others,
      )) as unknown[];
    } catch {
      if (rest.length > 0) this.#oneSlotUntil = Date.now() + CROSS_SLOT_BACKOFF_MS;
      // One at a time, in order (a user's notifications must not overtake each other, which retries of
      // concurrent calls in a failover can): each gets its own answer (or its own error).
      for (const item of group) await this.one(item.call, '').then(item.resolve, item.reject);
      return;
    }
    for (const [i, item] of ordered.entries()) {
      item.resolve(replies.slice(i * APPEND_REPLY, (i + 1) * APPEND_REPLY) as Reply);
    }
  }
}
