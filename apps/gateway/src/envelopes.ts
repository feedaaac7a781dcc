import { randomUUID } from 'node:crypto';
import {
  envelopeIndexKey,
  envelopeJobOptions,
  NOTIFY_ENVELOPE_JOB_NAME,
  type NotificationEnvelope,
  type NotificationJob,
  type RetryPolicy,
} from '@herald/protocol';
import type { Queue } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import { checkJobs } from './queue-jobs.js';

interface Pending {
  items: NotificationJob[];
  settled: Promise<void>;
  resolve: () => void;
  reject: (error: unknown) => void;
  /** Sends it once it has lingered (see {@link Envelopes}), however many join meanwhile. */
  linger: NodeJS.Timeout | NodeJS.Immediate;
}

/** What sent an envelope: full, its linger was up, every request held was waiting (idle), shutdown. */
export type EnvelopeFlush = 'full' | 'linger' | 'idle' | 'shutdown';

/**
 * Notifications an envelope should gather at the recent arrival rate, by default
 * (`HERALD_ENVELOPE_TARGET_ITEMS`; see {@link ArrivalRate}).
 */
export const ENVELOPE_TARGET_ITEMS = 20;

/**
 * Longest an envelope gathers, ms, by default (`HERALD_ENVELOPE_WINDOW_MS`; at most a quarter of
 * `HERALD_REDIS_TIMEOUT_MS`). 20 ms and 20 notifications: at 1,000/s ~0.46× the server CPU per notification
 * of the commit envelopes started from and ~0.7× the Redis work of 10 and 10, for ~8 ms more of median
 * wait under concurrent load (bench:delivery, bench:cost); a sender that waits for each answer is never held.
 */
export const ENVELOPE_WINDOW_MS = 20;

/**
 * The recent arrival rate of notifications, as an exponentially weighted mean of the gaps between them
 * (a batch's notifications share theirs), and the linger it gives: what `targetItems`
 * ({@link ENVELOPE_TARGET_ITEMS} by default) notifications take at that rate, between a tenth of
 * `windowMs` (at least 1 ms) and `windowMs`.
 */
export class ArrivalRate {
  /** Mean gap between notifications, ms; starts at the window (a quiet gateway). */
  #gapMs: number;
  /** When the last notification came (`performance.now()`). */
  #lastAt: number | undefined;

  constructor(
    private readonly windowMs: number,
    private readonly targetItems = ENVELOPE_TARGET_ITEMS,
  ) {
    this.#gapMs = windowMs;
  }

  /** Counts `count` notifications arriving now into the mean gap. */
  arrived(count: number): void {
    const now = performance.now();
    if (this.#lastAt !== undefined && count > 0) {
      // Each of the `count` shares the gap since the last arrival; weight 0.1 per notification, at most 1.
      const gap = Math.min(now - this.#lastAt, this.windowMs) / count;
      const weight = Math.min(1, 0.1 * count);
      this.#gapMs += weight * (gap - this.#gapMs);
    }
    this.#lastAt = now;
  }

  /** The linger for `targetItems` notifications when a `share` of them count (a partition's). */
  lingerMs(share = 1): number {
    const { windowMs } = this;
    return Math.min(windowMs, Math.max(1, windowMs / 10, (this.targetItems * this.#gapMs) / share));
  }
}

/**
 * Gathers the notifications one gateway accepts into one BullMQ job, an envelope of at most `maxItems`:
 * one add, one job for the worker to take and finish, where one job per notification costs Redis each of
 * those (the largest part of its work per notification). An envelope goes when full, or once it has
 * lingered (Kafka's `linger.ms`) for as long as the recent arrival rate takes to bring
 * {@link ENVELOPE_TARGET_ITEMS} notifications, between a tenth of `windowMs` (`HERALD_ENVELOPE_WINDOW_MS`)
 * and the whole window, however many join meanwhile. The rate is an exponentially weighted mean of the
 * gaps between notifications (a batch's notifications share theirs).
 *
 * Why the arrival rate: at a steady 1,000/s a fixed linger of a fifth of the window (2 ms) gathered ~3
 * notifications per envelope, so BullMQ's per-job scripts still cost Redis ~130 µs per notification
 * (bench:cost); lingering until ~10 have come (the whole 10 ms window there) divides that by ~3. A pool
 * of connections waiting for their answers (bench:gateway, 50 at once) makes the rate depend on the
 * linger: aiming at 10 keeps its linger near the old 2 ms (aiming at 16 lengthened it to ~3 ms and cost
 * the pool ~13 % of its requests/s), while a fixed long linger held every pooled request for the whole
 * window. Measured before (bench:gateway, bench:cost, each pair in one run): a debounce (a fifth of the
 * window without a newcomer) kept a pool waiting while newcomers kept coming (4,724 req/s against 6,236
 * for group commit); group commit (an envelope at once when no add is on its way) filled envelopes least.
 * Every caller of {@link add} waits for its envelope's add, so a `202` still means the notification is
 * in Redis; an envelope's failure is each of its callers' (each answers its own 503). The envelope index
 * gets each notification's envelope first (status and cancel find it there).
 *
 * @example
 * ```ts
 * const envelopes = new Envelopes(queue, connection, { windowMs: 10, maxItems: 200, retry });
 * await envelopes.add([job]); // resolves once the envelope carrying it is in Redis
 * ```
 */
export class Envelopes {
  #pending: Pending | undefined;
  readonly #index: string;
  /** The recent arrival rate, when not gathered (a gathering keeps its own). */
  readonly #arrivals: ArrivalRate | undefined;

  constructor(
    private readonly queue: Queue,
    private readonly connection: Redis | Cluster,
    private readonly options: {
      windowMs: number;
      /** Notifications to gather at the recent rate ({@link ENVELOPE_TARGET_ITEMS} when not given). */
      targetItems?: number;
      maxItems: number;
      retry: RetryPolicy;
      /** Told of every envelope sent, with what sent it. */
      onFlush?: (reason: EnvelopeFlush) => void;
      /**
       * When the notifications were gathered before they come (the limiter's decisions: see
       * {@link Gathering}): an envelope goes in the next turn, with the decisions' own reason.
       */
      gathered?: Gathering;
    },
  ) {
    this.#index = envelopeIndexKey({ prefix: queue.opts.prefix ?? 'bull', name: queue.name });
    // An envelope's options are the same for every envelope but its id: checked here once, BullMQ
    // refuses none at run time (so an error of an envelope's add is Redis's: see `addDurably`).
    checkJobs(queue, [
      {
        name: NOTIFY_ENVELOPE_JOB_NAME,
        data: { items: [] } satisfies NotificationEnvelope,
        opts: envelopeJobOptions(`envelope-${randomUUID()}`, options.retry),
      },
    ]);
    this.#arrivals =
      options.gathered === undefined ? new ArrivalRate(options.windowMs, options.targetItems) : undefined;
  }

  /**
   * How long the next envelope lingers: what its target (`targetItems`) of notifications takes at the
   * recent rate, between a tenth of the window (at least 1 ms) and the window; gathered, the gathering's.
   */
  lingerMs(): number {
    return (this.options.gathered ?? this.#arrivals)?.lingerMs() ?? this.options.windowMs;
  }

  /** Puts `items` (in send order) in the next envelope; resolves once that envelope is in Redis. */
  add(items: readonly NotificationJob[]): Promise<void> {
    // Gathered: counted as they came, before their decisions (here they come a gathering at a time).
    this.#arrivals?.arrived(items.length);
    const open = this.#pending;
    if (open !== undefined && open.items.length + items.length > this.options.maxItems) this.flush('full');
    const pending = this.#pending ?? this.#open();
    pending.items.push(...items);
    if (pending.items.length >= this.options.maxItems) this.flush('full');
    return pending.settled;
  }

  /** Sends the envelope being gathered now, if any, for `reason`. */
  flush(reason: EnvelopeFlush): void {
    const pending = this.#pending;
    if (pending === undefined) return;
    this.#pending = undefined;
    this.options.onFlush?.(reason);
    if (this.options.gathered === undefined) clearTimeout(pending.linger as NodeJS.Timeout);
    else clearImmediate(pending.linger as NodeJS.Immediate);
    this.#send(pending.items).then(pending.resolve, pending.reject);
  }

  #open(): Pending {
    let resolve!: () => void;
    let reject!: (error: unknown) => void;
    const settled = new Promise<void>((yes, no) => {
      resolve = yes;
      reject = no;
    });
    const pending: Pending = {
      items: [],
      settled,
      resolve,
      reject,
      linger:
        this.options.gathered === undefined
          ? setTimeout(() => this.flush('linger'), this.lingerMs())
          : setImmediate(this.#gatheredFlush),
    };
    this.#pending = pending;
    return pending;
  }

  /**
   * Gathered: the envelope goes in the turn after its first notification was added, once every decision
   * batch of its gathering (and of those before) has been answered (on a Cluster they come back one per
   * tenant, and the requests of the later ones add theirs meanwhile), unless it went otherwise (full,
   * idle, shutdown). It does not wait for a gathering sent after its own: with two in Redis at once (a
   * pool answered in halves, see {@link EnvelopeSenders}) each half has its own envelope.
   */
  readonly #gatheredFlush = (): void => {
    const gathering = this.options.gathered;
    const unanswered = gathering?.unanswered();
    if (unanswered === undefined) {
      this.flush(gathering?.reason ?? 'linger');
      return;
    }
    const pending = this.#pending;
    void unanswered.then(() =>
      setImmediate(() => {
        if (this.#pending === pending) this.flush(gathering?.reason ?? 'linger');
      }),
    );
  };

  async #send(items: NotificationJob[]): Promise<void> {
    const envelopeId = `envelope-${randomUUID()}`;
    const fields: string[] = [];
    for (const item of items) fields.push(item.id, envelopeId);
    const data: NotificationEnvelope = { items };
    // One connection, in this order: the index before the job, so a worker never finishes an envelope
    // whose index fields come after it.
    const [index, job] = await Promise.allSettled([
      this.connection.hset(this.#index, ...fields),
      this.queue.add(NOTIFY_ENVELOPE_JOB_NAME, data, envelopeJobOptions(envelopeId, this.options.retry)),
    ]);
    // The job's own answer says whether the notifications are in Redis (an index field without its job
    // is never read); a job queued without its index is, so that failure must not read as a refusal.
    if (job.status === 'rejected') throw job.reason;
    if (index.status === 'rejected')
      throw new Error('The envelope is queued, its index was not written', { cause: index.reason });
  }
}

/**
 * Where the gateway's notifications linger: before their limiter decisions, which all go in one script
 * call when the gathering goes (on a Cluster, one per tenant: see {@link Gathering.unanswered}), so that the
 * decisions of one envelope cost Redis one call (the sender's bucket, the `TIME`, the call's overhead
 * once) instead of one per turn of the event loop (~2 at 1,000/s). The envelope then goes in the next
 * turn, once every request of the gathering has been decided and added ({@link Envelopes}'
 * `gathered`): a request waits one linger as before, before its decision instead of after it.
 *
 * The gathering goes once it has lingered (the arrival rate's linger, {@link ArrivalRate}), when every
 * request held is waiting ({@link EnvelopeSenders}), or when a limiter's batch is full
 * (`batchFlushAt`, which sends that batch alone).
 *
 * @example
 * ```ts
 * const gathering = new Gathering({ windowMs: 10, partitions: 1, onJoin: () => senders.check() });
 * gathering.arrived(1); // a notification has come, its decision is about to be queued
 * new RateLimiter({ redis, policies, batchSchedule: gathering.schedule });
 * ```
 */
export class Gathering {
  #sends: (() => Promise<void>)[] = [];
  /** The decision batches sent and not yet all answered (on a Cluster, a batch per tenant's slot). */
  readonly #unanswered = new Map<Promise<unknown>, number>();
  /** Gatherings sent so far, and the latest of them with a decision batch answered. */
  #gatherings = 0;
  #answeredGathering = 0;
  #timer: NodeJS.Timeout | undefined;
  #reason: EnvelopeFlush = 'linger';
  readonly #arrivals: ArrivalRate;
  readonly #share: number;
  readonly #onJoin: () => void;
  readonly #onGo: () => void;

  constructor(options: {
    windowMs: number;
    /** Notifications to gather at the recent rate ({@link ENVELOPE_TARGET_ITEMS} when not given). */
    targetItems?: number;
    /** Envelopes it fills at once (one per queue partition): it lingers for each to get its share. */
    partitions: number;
    /** Asked after each batch joins: may send the gathering at once (`go('idle')`). */
    onJoin?: () => void;
    /** Told when the gathering goes, whatever sent it (the requests waiting next are in the next one). */
    onGo?: () => void;
  }) {
    this.#arrivals = new ArrivalRate(options.windowMs, options.targetItems);
    this.#share = 1 / options.partitions;
    this.#onJoin = options.onJoin ?? (() => {});
    this.#onGo = options.onGo ?? (() => {});
  }

  /** Counts `count` notifications arriving now (before their decision is queued). */
  arrived(count: number): void {
    this.#arrivals.arrived(count);
  }

  /** How long the next gathering lingers (see {@link ArrivalRate}). */
  lingerMs(): number {
    return this.#arrivals.lingerMs(this.#share);
  }

  /** What sent the last gathering (the reason of the envelopes it fills). */
  get reason(): EnvelopeFlush {
    return this.#reason;
  }

  /**
   * Settles once every decision batch of the gatherings up to the latest with an answer has been
   * answered; undefined when none is waiting. On one Redis server a gathering's decisions come back in
   * one reply; on a Cluster in one per tenant (each tenant's buckets share its slot), at different times:
   * its envelopes wait for all of them, not for a later gathering's.
   */
  unanswered(): Promise<unknown> | undefined {
    const waiting: Promise<unknown>[] = [];
    for (const [answered, gathering] of this.#unanswered)
      if (gathering <= this.#answeredGathering) waiting.push(answered);
    return waiting.length === 0 ? undefined : Promise.allSettled(waiting);
  }

  /** A limiter's `batchSchedule`: its batch goes with the gathering. */
  readonly schedule = (send: () => Promise<void>): void => {
    this.#sends.push(send);
    this.#timer ??= setTimeout(() => this.go('linger'), this.lingerMs());
    this.#onJoin();
  };

  /** Sends every batch gathered now, for `reason`. */
  go(reason: EnvelopeFlush): void {
    if (this.#sends.length === 0) return;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#reason = reason;
    const sends = this.#sends;
    this.#sends = [];
    this.#onGo();
    const gathering = ++this.#gatherings;
    for (const send of sends) {
      const answered = send().catch(() => {});
      this.#unanswered.set(answered, gathering);
      void answered.then(() => {
        this.#unanswered.delete(answered);
        if (gathering > this.#answeredGathering) this.#answeredGathering = gathering;
      });
    }
  }
}

/**
 * The enqueueing requests a gateway holds, to send the envelopes being gathered at once when no other
 * notification can be on its way: every request in flight is waiting for an envelope, and there are as
 * many as the most held at once over the last second or two. A pool of connections that waits for its
 * answers (a backend sending one at a time, or 50 at once) is then never held for a linger it cannot
 * fill; independent senders (more in flight at their peaks than at most moments) still get the linger.
 *
 * @example
 * ```ts
 * const senders = new EnvelopeSenders(() => envelopes.forEach((e) => e.flush('idle')));
 * const sender = senders.enter(reply.raw); // its end (answered or aborted) leaves
 * sender.wait(); // about to wait for its envelope(s)
 * ```
 */
export class EnvelopeSenders {
  #inFlight = 0;
  #waiting = 0;
  #peak = 0;
  #previousPeak = 0;
  #peakSince = performance.now();
  /** The gathering being filled, counted: a request left knows whether it was in it. */
  #gathering = 0;
  /** Requests, and their notifications, waiting in the gathering being filled (not yet sent). */
  #gathered = 0;
  #gatheredItems = 0;

  constructor(
    private readonly onAllWaiting: () => void,
    /**
     * Notifications a gathering holds before it may go at half the recent peak of requests: at least an
     * envelope's target ({@link ENVELOPE_TARGET_ITEMS} per queue partition), so that an envelope that goes
     * early is as full as a linger would have made it.
     */
    private readonly targetItems = ENVELOPE_TARGET_ITEMS,
  ) {}

  /** Counts a request in until `response` closes (answered, or its connection gone). */
  enter(response: { once(event: 'close', listener: () => void): unknown }): {
    wait(count?: number): void;
  } {
    this.#inFlight += 1;
    const now = performance.now();
    if (now - this.#peakSince >= 1000) {
      this.#previousPeak = now - this.#peakSince >= 2000 ? 0 : this.#peak;
      this.#peak = 0;
      this.#peakSince = now;
    }
    if (this.#inFlight > this.#peak) this.#peak = this.#inFlight;
    let waiting = false;
    let left = false;
    /** The gathering it waits in, and its notifications. */
    let gathering = -1;
    let items = 0;
    const leave = () => {
      if (left) return;
      left = true;
      this.#inFlight -= 1;
      if (waiting) this.#waiting -= 1;
      if (gathering === this.#gathering) {
        this.#gathered -= 1;
        this.#gatheredItems -= items;
      }
      this.check();
    };
    response.once('close', leave);
    return {
      wait: (count = 1) => {
        if (waiting || left) return;
        waiting = true;
        this.#waiting += 1;
        gathering = this.#gathering;
        items = count;
        this.#gathered += 1;
        this.#gatheredItems += count;
        // After the caller's synchronous rest: the request's limiter call joins the gathering first (a
        // check now would send the gathering without it, and the call would go in a batch of its own).
        queueMicrotask(this.check);
      },
    };
  }

  /** The gathering has gone (for whatever reason): the requests waiting from now on are in the next. */
  gone(): void {
    this.#gathering += 1;
    this.#gathered = 0;
    this.#gatheredItems = 0;
  }

  /** Requests waiting (for their gathering or envelope) until answered. */
  get waiting(): number {
    return this.#waiting;
  }

  /**
   * Calls `onAllWaiting` when every request held is waiting and either there are as many as at the
   * recent peak, or the gathering being filled holds half of that peak and its envelope's target. A pool
   * that keeps its requests in flight (a backend sending as fast as it is answered) is then answered in
   * two halves that take turns: one is in Redis while the gateway reads the other, where one gathering of
   * the whole pool left the gateway idle for both round trips of each (its decisions, then its envelope).
   */
  readonly check = (): void => {
    if (this.#waiting === 0 || this.#waiting < this.#inFlight) return;
    const peak = Math.max(this.#peak, this.#previousPeak);
    if (
      this.#inFlight >= peak ||
      (this.#gathered >= Math.ceil(peak / 2) && this.#gatheredItems >= this.targetItems)
    )
      this.onAllWaiting();
  };
}
