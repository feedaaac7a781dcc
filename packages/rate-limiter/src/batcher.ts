import calculateSlot from 'cluster-key-slot';
import type { Redis } from 'ioredis';
import type { PreparedCall } from './call.js';
import type { ResolvedOptions } from './options.js';
import { replyLength } from './reply.js';
import type { ScriptCall } from './scripts.js';
import {
  corkUntilNextTick,
  nowArg,
  pushBucketArgs,
  scriptArgs,
  TIMEOUT,
  TimedOut,
  withLateTimeout,
  withTimeout,
} from './transport.js';

/** Most calls in one batch script call. */
export const MAX_BATCH_CALLS = 100;
/** Default `batchFlushAt`: measured in bench/limiter, 16 and 10 alike, 25 a little less, 100 far less. */
export const DEFAULT_FLUSH_AT = 16;
/**
 * Most buckets in one batch script call (each is ~3–4 µs of Redis time, so ≤ ~1 ms of Redis per
 * script call; two gateway batch requests of 1 sender + 100 recipients fit). A call with more buckets
 * goes alone, with the N-key script, never split.
 */
const MAX_BATCH_KEYS = 256;

/** A call waiting for this turn's batch script call. */
interface PendingCall {
  call: PreparedCall;
  resolve: (reply: number[]) => void;
  reject: (error: unknown) => void;
}

/** The script runners a batch needs: the batch script, and the one-key and N-key scripts for a lone call. */
export interface BatchScripts {
  batch: ScriptCall;
  one: ScriptCall;
  n: ScriptCall;
}

/**
 * `batchCalls`: the calls of one turn of the event loop go to Redis in one batch script call
 * (token-bucket-m.lua / gcra-m.lua), each answered with the N-key script's reply for that call. On Redis
 * Cluster, one batch script call per hash slot (every key of one call shares a slot; calls of different
 * slots share no key, so their order between them decides nothing).
 */
export class Batcher {
  readonly #options: ResolvedOptions;
  readonly #scripts: BatchScripts;
  #pending: PendingCall[] = [];
  /** The batch being gathered, counted: a scheduled send of a batch that has already left does nothing. */
  #batch = 0;
  /** Whether the batch being gathered has its send scheduled. */
  #scheduled = false;

  constructor(options: ResolvedOptions, scripts: BatchScripts) {
    this.#options = options;
    this.#scripts = scripts;
  }

  /**
   * Queues a call for the batch being gathered; resolves with the N-key script's reply for that call.
   * By default the batch leaves in `setImmediate`, not `process.nextTick`: Node drains the nextTick
   * queue after every I/O callback, and each HTTP request is its own callback, so under 50 concurrent
   * requests every nextTick batch held one call (82,683 of 82,683 in bench/gateway's limiter server);
   * setImmediate runs once the callbacks already due in this turn have run (there, batches of up to 50,
   * ~20–30 typical). `batchSchedule` may hold it longer.
   */
  enqueue(call: PreparedCall): Promise<number[]> {
    return new Promise<number[]>((resolve, reject) => {
      this.#pending.push({ call, resolve, reject });
      if (this.#pending.length >= this.#options.flushAt) {
        // Full: it leaves now, and Redis works on it while this turn prepares the next one.
        this.#flush();
      } else if (!this.#scheduled) {
        this.#scheduled = true;
        const batch = this.#batch;
        this.#options.schedule(() => (batch === this.#batch ? this.#flush() : Promise.resolve()));
      }
    });
  }

  /**
   * Sends the calls queued in this turn, in call order: one script call per MAX_BATCH_CALLS calls or
   * MAX_BATCH_KEYS buckets, whichever comes first (a lone call runs the one-key or N-key script); on
   * Redis Cluster, so for each hash slot's calls.
   */
  readonly #flush = (): Promise<void> => {
    const pending = this.#pending;
    this.#pending = [];
    this.#batch += 1;
    this.#scheduled = false;
    const now = nowArg(this.#options.clock);
    if (!this.#options.isCluster) return this.#send(pending, now);
    const bySlot = new Map<number, PendingCall[]>();
    for (const item of pending) {
      const slot = calculateSlot(item.call.keys[0] ?? '');
      const group = bySlot.get(slot);
      if (group === undefined) bySlot.set(slot, [item]);
      else group.push(item);
    }
    return Promise.all([...bySlot.values()].map((group) => this.#send(group, now))).then(() => {});
  };

  /**
   * Sends `pending` (calls whose keys may share one script call), in order, in as few calls as fit;
   * settles once each call has been answered (resolved or rejected).
   */
  #send(pending: PendingCall[], now: string): Promise<void> {
    const sent: Promise<void>[] = [];
    let corked = false;
    for (let from = 0; from < pending.length; ) {
      let to = from + 1;
      let keys = pending[from]!.call.keys.length;
      while (to < pending.length && to - from < MAX_BATCH_CALLS) {
        const more = pending[to]!.call.keys.length;
        if (keys + more > MAX_BATCH_KEYS) break;
        keys += more;
        to++;
      }
      if (!corked && to < pending.length && this.#options.coalesceWrites) {
        // Several script calls at once: one socket write for all of them.
        corkUntilNextTick((this.#options.redis as Redis).stream);
        corked = true;
      }
      if (to - from === 1) sent.push(this.#sendAlone(pending[from]!, now));
      else sent.push(this.#sendBatch(pending.slice(from, to), keys, now));
      from = to;
    }
    return Promise.all(sent).then(() => {});
  }

  #sendAlone(pending: PendingCall, now: string): Promise<void> {
    const { call } = pending;
    const slots = call.keys.length;
    const args = scriptArgs(call, now, this.#options.ttlMarginMs, this.#options.policies);
    const run = slots === 1 ? this.#scripts.one : this.#scripts.n;
    return withLateTimeout(run(slots, ...args), this.#options.timeoutMs).then(
      pending.resolve,
      pending.reject,
    );
  }

  /** One batch script call for `batch` (`keys` buckets in all); one timeout for the whole batch. */
  #sendBatch(batch: PendingCall[], keys: number, now: string): Promise<void> {
    const { policies, ttlMarginMs, timeoutMs } = this.#options;
    const args: (string | number)[] = new Array(keys);
    let k = 0;
    for (const { call } of batch) for (const key of call.keys) args[k++] = key;
    args.push(now, ttlMarginMs);
    for (const { call } of batch) {
      args.push(call.keys.length);
      pushBucketArgs(args, call, policies);
    }
    const call = this.#scripts.batch(keys, ...args);
    // Per call, in order: the N-key script's reply for that call.
    const parts = (reply: number[]) => {
      const out: number[][] = new Array(batch.length);
      let at = 0;
      for (let i = 0; i < batch.length; i++) {
        const end = at + replyLength(batch[i]!.call.keys.length);
        out[i] = reply.slice(at, end);
        at = end;
      }
      return out;
    };
    return withTimeout(call, timeoutMs).then(
      (reply) => {
        const answers = parts(reply);
        for (let i = 0; i < batch.length; i++) batch[i]!.resolve(answers[i]!);
      },
      (error: unknown) => {
        if (error !== TIMEOUT) {
          for (const pending of batch) pending.reject(error);
          return;
        }
        // Timed out: each call's own part of the reply, whenever it comes (see RateLimiter's refunds).
        // Marked handled: only a refused call's is read, and a script that fails later must not be an
        // unhandled rejection (which ends a Node process).
        const late = call.then(parts);
        for (let i = 0; i < batch.length; i++) {
          const answer = late.then((answers) => answers[i]!);
          answer.catch(() => {});
          batch[i]!.reject(new TimedOut(answer));
        }
      },
    );
  }
}
