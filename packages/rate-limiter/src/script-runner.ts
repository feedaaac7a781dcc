import { once } from 'node:events';
import type { Redis } from 'ioredis';
import { Batcher } from './batcher.js';
import type { PreparedCall } from './call.js';
import type { ResolvedOptions } from './options.js';
import { defineBatchScript, defineRefundScript, defineScript, type ScriptCall } from './scripts.js';
import {
  corkUntilNextTick,
  failureReason,
  nowArg,
  scriptArgs,
  TimedOut,
  Unavailable,
  withLateTimeout,
  withTimeout,
} from './transport.js';

/** The least time a refund is given to answer, ms (it runs once Redis answers again). */
const REFUND_TIMEOUT_MS = 2000;

const ACCEPTABLE_STATUSES_TO_WAIT = new Set(['wait', 'connecting', 'connect']);

/**
 * Runs a prepared call's script on Redis: waits (bounded) for a connecting client, sends the call in
 * this turn's batch or alone, and logs when Redis becomes unavailable and when it answers again.
 */
export class ScriptRunner {
  readonly #options: ResolvedOptions;
  readonly #run: ScriptCall;
  /** The single-key script (same reply), for calls with one bucket; `#run` when the algorithm has none. */
  readonly #run1: ScriptCall;
  /** Set when `batchCalls` applies (an algorithm with a batch script). */
  readonly #batcher: Batcher | undefined;
  /** The algorithm's refund script, if it has one. */
  readonly #refund: ScriptCall | undefined;
  #healthy = true;

  constructor(options: ResolvedOptions) {
    this.#options = options;
    this.#run = defineScript(options.redis, options.algorithm);
    this.#run1 = defineScript(options.redis, options.algorithm, 1);
    const batch = options.batchCalls ? defineBatchScript(options.redis, options.algorithm) : undefined;
    this.#batcher =
      batch === undefined ? undefined : new Batcher(options, { batch, one: this.#run1, n: this.#run });
    this.#refund = defineRefundScript(options.redis, options.algorithm);
  }

  /** The script's reply (its code not yet checked), or why Redis did not give one. */
  async send(call: PreparedCall): Promise<number[] | Unavailable> {
    const redis = this.#options.redis;
    let reply: number[];
    try {
      // Never hand a command to a client that is not ready: ioredis would queue it offline and replay
      // it after a reconnect, when its decision no longer matters but its tokens would still be taken.
      const status = redis.status;
      if (status !== 'ready') {
        if (!ACCEPTABLE_STATUSES_TO_WAIT.has(status))
          return this.#unhealthy(new Unavailable('not-connected'));
        if (status === 'wait') redis.connect().catch(() => {});
        await withTimeout(once(redis, 'ready'), this.#options.timeoutMs);
      }
      if (this.#batcher !== undefined) {
        reply = await this.#batcher.enqueue(call);
      } else {
        const slots = call.keys.length;
        const { clock, ttlMarginMs, policies, timeoutMs } = this.#options;
        const args = scriptArgs(call, nowArg(clock), ttlMarginMs, policies);
        if (this.#options.coalesceWrites) corkUntilNextTick((redis as Redis).stream);
        reply = await withLateTimeout((slots === 1 ? this.#run1 : this.#run)(slots, ...args), timeoutMs);
      }
    } catch (error) {
      const late = error instanceof TimedOut ? error.late : undefined;
      return this.#unhealthy(new Unavailable(failureReason(error), error, late));
    }
    if (!this.#healthy) {
      this.#healthy = true;
      this.#options.logger?.warn({}, 'rate limiter: Redis answers again; decisions are shared again');
    }
    return reply;
  }

  /**
   * Gives back what `call` took (its costs, to each of its buckets), for a call whose reply came too late
   * to be used; false when the algorithm has no refund (the window algorithms).
   */
  async refund(call: PreparedCall): Promise<boolean> {
    if (this.#refund === undefined) return false;
    const { clock, ttlMarginMs, policies, timeoutMs } = this.#options;
    const args = scriptArgs(call, nowArg(clock), ttlMarginMs, policies);
    await withTimeout(this.#refund(call.keys.length, ...args), Math.max(REFUND_TIMEOUT_MS, timeoutMs));
    return true;
  }

  /** Deletes `keys` (one DEL each: on Cluster they may sit in different slots). */
  async del(keys: readonly string[]): Promise<void> {
    const redis = this.#options.redis;
    await withTimeout(Promise.all(keys.map((k) => redis.del(k))), this.#options.timeoutMs);
  }

  #unhealthy(unavailable: Unavailable): Unavailable {
    if (this.#healthy) {
      this.#healthy = false;
      this.#options.logger?.warn(
        { reason: unavailable.reason, mode: this.#options.mode, err: unavailable.cause },
        'rate limiter: Redis unavailable; the failure mode decides until it answers again',
      );
    }
    return unavailable;
  }
}
