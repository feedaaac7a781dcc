import type { Cluster, Redis } from 'ioredis';
import { settleWithin } from './settle-within.js';

/** How often a {@link RedisClock} reads Redis's `TIME` again, ms. */
const SYNC_EVERY_MS = 10_000;
/** How long one reading may take before it is given up (the last offset stays), ms. */
const SYNC_TIMEOUT_MS = 1000;
/** How often a {@link RedisClock} with no reading yet tries again, ms. */
const RETRY_MS = 1000;
/** How long a reading is kept against slower ones (see {@link RedisClock.sync}), ms. */
const KEEP_BEST_MS = 60_000;
/**
 * The largest step back {@link RedisClock.now} holds its answer through rather than follow, ms: a new
 * reading a little behind the last one. A larger one is Redis's clock set right, and followed at once.
 */
const HOLD_BACK_MS = 1000;

/**
 * Redis's clock, as this process can tell it without a round trip: its own monotonic clock plus the
 * offset measured by `TIME` (at start, then every 10 s; a reading is good to half its round trip).
 *
 * What one app stamps and another compares (a notification's `createdAt`, from which `ttlMs` and
 * `delayMs` count, and the order the worker stores a user's notifications in; a deployment
 * registration's heartbeat) must be one clock whatever the machines' clocks say: the inbox scripts and
 * the rate limiter read Redis's `TIME`, so that is the one. A gateway 45 s behind its Redis stamped
 * every notification 45 s early, so a `ttlMs` of 30 s expired before the worker saw it and a `delayMs`
 * of 20 s was due at once.
 *
 * Until the first reading answers (Redis not reachable at start) it is this machine's clock.
 *
 * @example
 * ```ts
 * const clock = new RedisClock(redis);
 * await clock.sync();
 * clock.start();
 * const createdAt = new Date(clock.now()).toISOString();
 * ```
 */
export class RedisClock {
  readonly #redis: Redis | Cluster;
  readonly #everyMs: number;
  /** Redis's ms since the epoch minus `performance.now()`: immune to a step of this machine's clock. */
  #base = Date.now() - performance.now();
  /** The round trip of the reading `#base` comes from (Infinity: none yet), and when it came, ms. */
  #rttMs = Number.POSITIVE_INFINITY;
  #readAt = 0;
  /** The last answer of {@link RedisClock.now}. */
  #last = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(redis: Redis | Cluster, options: { everyMs?: number } = {}) {
    this.#redis = redis;
    this.#everyMs = options.everyMs ?? SYNC_EVERY_MS;
  }

  /**
   * Redis's clock now, ms since the epoch (an estimate: off by at most half a `TIME` round trip). Never
   * less than its last answer when a new reading is up to 1 s behind the one before (it answers the same
   * until the clock has caught up): what one process stamps in turn (the `createdAt` by which the worker
   * orders a user's notifications, the `at` of webhook events) keeps its order across readings.
   */
  now(): number {
    const now = this.#estimate();
    if (now < this.#last && this.#last - now <= HOLD_BACK_MS) return this.#last;
    this.#last = now;
    return now;
  }

  /**
   * How far this machine's wall clock (`Date.now()`) is ahead of Redis's, ms (negative: behind), by the
   * last reading; undefined before the first. What only libraries that read the machine's clock
   * themselves (BullMQ's delays) need to know.
   */
  offsetMs(): number | undefined {
    return this.#readAt > 0 ? Date.now() - this.#estimate() : undefined;
  }

  /** Redis's clock now by the last reading, ms (what {@link RedisClock.now} answers, without its hold). */
  #estimate(): number {
    return Math.round(this.#base + performance.now());
  }

  /**
   * Reads `TIME` once; answers whether the reading is taken within 1 s. A reading is not taken when it
   * is much slower than the one in use (more than twice its round trip plus 5 ms: Redis busy, or the
   * command queued behind a long pipeline, says little about when Redis read its clock) while that one
   * is under a minute old (older, one within 1 s replaces it). An answer later than 1 s is still taken
   * when there is no reading yet (a process starting on a loaded machine, whose event loop ran the
   * timeout before the answer).
   */
  async sync(): Promise<boolean> {
    const sent = performance.now();
    const reading = this.#redis.time().then(
      ([seconds, micros]) =>
        this.#take(sent, performance.now(), Number(seconds) * 1000 + Number(micros) / 1000),
      () => false,
    );
    return await settleWithin(reading, SYNC_TIMEOUT_MS, false);
  }

  #take(sent: number, received: number, redisMs: number): boolean {
    if (!Number.isFinite(redisMs)) return false;
    const rtt = received - sent;
    const slow = rtt > this.#rttMs * 2 + 5;
    if (slow && (received - this.#readAt < KEEP_BEST_MS || rtt > SYNC_TIMEOUT_MS)) return false;
    this.#rttMs = rtt;
    this.#readAt = received;
    // Redis read its clock somewhere in the round trip: the middle is off by at most half of it.
    this.#base = redisMs - (sent + received) / 2;
    return true;
  }

  /**
   * Reads `TIME` again every 10 s, and every second while no reading was taken yet (Redis away at
   * start). The timer keeps no process alive.
   */
  start(): void {
    if (this.#timer !== undefined) return;
    let last = performance.now();
    this.#timer = setInterval(() => {
      if (this.#readAt > 0 && performance.now() - last < this.#everyMs) return;
      last = performance.now();
      void this.sync();
    }, RETRY_MS);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }
}
