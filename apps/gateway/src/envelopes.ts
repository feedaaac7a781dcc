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
  /** Sends it on the next turn when no envelope is being added (set once). */
  soon: NodeJS.Immediate | undefined;
  /** Sends it `windowMs` after it opened, however busy. */
  deadline: NodeJS.Timeout;
}

/**
 * Gathers the notifications one gateway accepts into one BullMQ job, an envelope of at most `maxItems`:
 * one add, one job for the worker to take and finish, where one job per notification costs Redis each of
 * those (the largest part of its work per notification). Group commit, as Nagle's algorithm or a
 * database's log: with no envelope add of this queue on its way to Redis, the envelope goes on the next
 * event-loop turn (what the same turn brought rides with it); while one is on its way, the notifications
 * that arrive meanwhile gather and go together as soon as it returns; at the latest `windowMs`
 * (`HERALD_ENVELOPE_WINDOW_MS`) after the envelope opened, or when full. A lone sender waits for
 * nothing; under load each envelope carries what arrived during one add's round trip, so envelopes grow
 * with the load. (A debounce, a fifth of the window without a newcomer, cost a connection pool a quarter
 * of its throughput: bench:gateway, 50 connections, 4,724 against 6,236 req/s.) Every caller of
 * {@link add} waits for its envelope's add, so a `202` still means the notification is in Redis; an
 * envelope's failure is each of its callers' (each answers its own 503). The envelope index gets each
 * notification's envelope first (status and cancel find it there).
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
  /** Envelope adds on their way to Redis. */
  #sending = 0;

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
    else if (this.#sending === 0) pending.soon ??= setImmediate(() => this.flush());
    return pending.settled;
  }

  /** Sends the envelope being gathered now (on shutdown, or when it is full). */
  flush(): void {
    const pending = this.#pending;
    if (pending === undefined) return;
    this.#pending = undefined;
    if (pending.soon) clearImmediate(pending.soon);
    clearTimeout(pending.deadline);
    this.#sending++;
    this.#send(pending.items)
      .then(pending.resolve, pending.reject)
      .finally(() => {
        this.#sending--;
        // What gathered while this add was on its way goes now, as one envelope.
        if (this.#sending === 0 && this.#pending) this.#pending.soon ??= setImmediate(() => this.flush());
      });
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
      soon: undefined,
      deadline: setTimeout(() => this.flush(), this.options.windowMs),
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
