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

interface Pending {
  items: NotificationJob[];
  settled: Promise<void>;
  resolve: () => void;
  reject: (error: unknown) => void;
  /** Sends it a fifth of `windowMs` after it opened, however many join meanwhile. */
  linger: NodeJS.Timeout;
}

/**
 * Gathers the notifications one gateway accepts into one BullMQ job, an envelope of at most `maxItems`:
 * one add, one job for the worker to take and finish, where one job per notification costs Redis each of
 * those (the largest part of its work per notification). An envelope goes a fifth of `windowMs`
 * (`HERALD_ENVELOPE_WINDOW_MS`) after its first notification joined it, however many join meanwhile
 * (Kafka's `linger.ms`), or when full. Measured against the alternatives (bench:gateway with 50
 * connections, bench:cost at 1,000/s open loop, each pair in one run): a debounce (a fifth of the window
 * without a newcomer, at most the window) kept a connection pool's requests waiting for the whole window
 * while newcomers kept coming (4,724 req/s against 6,236 for group commit) for 0.89× group commit's
 * Redis work; group commit (an envelope at once when no add is on its way, else when it returns) and
 * this linger hold a pool's throughput (5,976 and 6,110 req/s), the linger for 0.92× group commit's
 * Redis work. Waiting while other requests are on their way filled envelopes most (0.48× the Redis
 * work of one job per notification, against the linger's 0.74×) but halved a pool's throughput.
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

  constructor(
    private readonly queue: Queue,
    private readonly connection: Redis | Cluster,
    private readonly options: { windowMs: number; maxItems: number; retry: RetryPolicy },
  ) {
    this.#index = envelopeIndexKey({ prefix: queue.opts.prefix ?? 'bull', name: queue.name });
  }

  /** Puts `items` (in send order) in the next envelope; resolves once that envelope is in Redis. */
  add(items: readonly NotificationJob[]): Promise<void> {
    const open = this.#pending;
    if (open !== undefined && open.items.length + items.length > this.options.maxItems) this.flush();
    const pending = this.#pending ?? this.#open();
    pending.items.push(...items);
    if (pending.items.length >= this.options.maxItems) this.flush();
    return pending.settled;
  }

  /** Sends the envelope being gathered now (on shutdown, or when it is full). */
  flush(): void {
    const pending = this.#pending;
    if (pending === undefined) return;
    this.#pending = undefined;
    clearTimeout(pending.linger);
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
      linger: setTimeout(() => this.flush(), Math.max(1, this.options.windowMs / 5)),
    };
    this.#pending = pending;
    return pending;
  }

  async #send(items: NotificationJob[]): Promise<void> {
    const envelopeId = `envelope-${randomUUID()}`;
    const fields: string[] = [];
    for (const item of items) fields.push(item.id, envelopeId);
    const data: NotificationEnvelope = { items };
    // One connection, in this order: the index before the job, so a worker never finishes an envelope
    // whose index fields come after it.
    await Promise.all([
      this.connection.hset(this.#index, ...fields),
      this.queue.add(NOTIFY_ENVELOPE_JOB_NAME, data, envelopeJobOptions(envelopeId, this.options.retry)),
    ]);
  }
}
