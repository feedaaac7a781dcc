import {
  connectionErrorLog,
  earlierLayouts,
  layoutRegistryKey,
  QUEUE_OPTIONS,
  type QueueRef,
  type QueueSettings,
} from '@herald/config';
import { type ConnectionOptions, type Job, Queue, Worker } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';

/** The job states that a drain waits out: anything that will still run. Failed jobs stay for the CLI. */
const PENDING = ['wait', 'delayed', 'prioritized', 'active', 'waiting-children'] as const;

/**
 * An earlier count not recorded for this long leaves the registry once its partitions hold no job at all
 * (failed ones included: until retried or removed they stay listed by the failed-jobs API and CLI).
 */
export const LAYOUT_FORGET_MS = 10 * 60_000;

/** What {@link Leftovers} needs of the worker it belongs to. */
export interface LeftoversOptions {
  /** Reads the registry and counts jobs (the worker's queue connection). */
  redis: Redis | Cluster;
  /** The current queue settings (`HERALD_QUEUE_*`). */
  queue: QueueSettings;
  /** What the BullMQ workers of the drained partitions connect with (as the worker's own). */
  connection: ConnectionOptions;
  concurrency: number;
  lockMs: number;
  stalledIntervalMs: number;
  /**
   * Processes a job of partition `ref` (whose queue is `queue`, on `redis`) as the worker processes its
   * own partitions' jobs.
   */
  process: (job: Job, ref: QueueRef, queue: Queue, token: string | undefined) => Promise<unknown>;
  /** The worker's `failed` handler. */
  onFailed: (job: Job | undefined, error: Error) => void;
  log: Logger;
  /** How often the registry and the drained partitions are looked at, ms. */
  checkMs: number;
}

interface Drain {
  ref: QueueRef;
  worker: Worker;
}

/**
 * Drains the partitions of earlier `HERALD_QUEUE_PARTITIONS` counts. A change of the count renames the
 * partitions (each count chooses its own hash tags), so the jobs queued before it, delayed ones and
 * retries included, would wait forever in queues that no worker consumes. The gateways record every
 * count they enqueue with ({@link layoutRegistryKey}); every `checkMs` a worker looks for partitions of
 * another count that still hold jobs, consumes each with a BullMQ worker of its own until nothing is
 * left to run there (failed jobs stay, for `herald failed`), and forgets a count that no gateway has
 * recorded for {@link LAYOUT_FORGET_MS} once its partitions hold no job at all. Within one partition a user's
 * notifications keep their order; across the change, one queued before it may be stored after one
 * sent after it.
 */
export class Leftovers {
  readonly #options: LeftoversOptions;
  readonly #drains = new Map<string, Drain>();
  /** Queues of earlier partitions, kept to count their jobs. */
  readonly #probes = new Map<string, Queue>();
  #timer: NodeJS.Timeout | undefined;
  #checking: Promise<void> | undefined;
  #closed = false;

  constructor(options: LeftoversOptions) {
    this.#options = options;
  }

  /** Looks now, then every `checkMs`. */
  start(): void {
    void this.check();
    this.#timer = setInterval(() => void this.check(), this.#options.checkMs);
    this.#timer.unref();
  }

  /** The partitions being drained now (their queues' prefixes). */
  get draining(): string[] {
    return [...this.#drains.values()].map((drain) => drain.ref.prefix);
  }

  /** One look at the registry and the partitions it names (never two at once). */
  check(): Promise<void> {
    this.#checking ??= this.#check()
      .catch((error: unknown) =>
        this.#options.log.warn(
          { err: error },
          'could not look for jobs of an earlier HERALD_QUEUE_PARTITIONS',
        ),
      )
      .finally(() => {
        this.#checking = undefined;
      });
    return this.#checking;
  }

  async #check(): Promise<void> {
    const { redis, queue, log } = this.#options;
    const seen = new Set<string>();
    for (const layout of await earlierLayouts(redis, queue)) {
      let left = 0;
      for (const ref of layout.leftovers) {
        if (this.#closed) return;
        const key = `${ref.prefix}:${ref.name}`;
        seen.add(key);
        const probe = this.#probe(key, ref);
        const { pending, failed } = await counts(probe);
        left += pending + failed;
        const drain = this.#drains.get(key);
        if (pending > 0 && drain === undefined) {
          log.warn(
            { prefix: ref.prefix, jobs: pending, partitions: layout.partitions, now: queue.partitions },
            `jobs left in a partition of HERALD_QUEUE_PARTITIONS=${layout.partitions}: draining them`,
          );
          this.#drains.set(key, this.#drain(ref, probe));
        } else if (pending === 0 && drain !== undefined) {
          this.#drains.delete(key);
          await drain.worker.close();
          log.info({ prefix: ref.prefix }, 'partition of an earlier HERALD_QUEUE_PARTITIONS drained');
        }
      }
      if (left === 0 && Date.now() - layout.recordedAt > LAYOUT_FORGET_MS) {
        await redis.hdel(layoutRegistryKey(queue), String(layout.partitions));
      }
    }
    // A count forgotten meanwhile (another worker's look): its drains, if any, end with it.
    for (const [key, drain] of this.#drains) {
      if (seen.has(key)) continue;
      this.#drains.delete(key);
      await drain.worker.close();
    }
  }

  /** The queue of `ref` on `redis`: counts its jobs, and is what a drain of it adds back to. */
  #probe(key: string, ref: QueueRef): Queue {
    let probe = this.#probes.get(key);
    if (probe === undefined) {
      probe = new Queue(ref.name, { ...QUEUE_OPTIONS, prefix: ref.prefix, connection: this.#options.redis });
      probe.on('error', connectionErrorLog(this.#options.log, 'queue error', { prefix: ref.prefix }));
      this.#probes.set(key, probe);
    }
    return probe;
  }

  #drain(ref: QueueRef, queue: Queue): Drain {
    const options = this.#options;
    const worker = new Worker(ref.name, (job, token) => options.process(job, ref, queue, token), {
      prefix: ref.prefix,
      concurrency: options.concurrency,
      lockDuration: options.lockMs,
      stalledInterval: options.stalledIntervalMs,
      connection: options.connection,
    });
    worker.on('failed', (job, error) => options.onFailed(job, error));
    worker.on('error', connectionErrorLog(options.log, 'worker error', { prefix: ref.prefix }));
    return { ref, worker };
  }

  /** Stops looking; the drains finish their active jobs and stop. */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#timer) clearInterval(this.#timer);
    await this.#checking;
    await Promise.all([...this.#drains.values()].map((drain) => drain.worker.close()));
    this.#drains.clear();
    await Promise.all([...this.#probes.values()].map((probe) => probe.close()));
    this.#probes.clear();
  }
}

/** Jobs of `queue` that will still run, and jobs that failed there (kept for the failed-jobs API and CLI). */
async function counts(queue: Queue): Promise<{ pending: number; failed: number }> {
  const counts = await queue.getJobCounts(...PENDING, 'failed');
  return { pending: PENDING.reduce((sum, type) => sum + (counts[type] ?? 0), 0), failed: counts.failed ?? 0 };
}
