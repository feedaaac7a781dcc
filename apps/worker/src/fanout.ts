import { setTimeout as sleep } from 'node:timers/promises';
import type { AppendResult, Inbox, InboxNotification, Topics } from '@herald/inbox';
import type { LivePublisher } from '@herald/live';
import { DEFAULT_TENANT, type FanoutCharge, type FanoutJob } from '@herald/protocol';
import { RateLimiter } from '@herald/rate-limiter';
import { DelayedError } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import { holdIfEarly } from './due.js';
import { appendOptionsOf, type Durability, storeAndPush } from './store.js';

/**
 * Appends in flight at once within a chunk: one round trip each batch. Redis runs a client's pipelined
 * commands back to back, so a single send's command that arrives meanwhile waits for at most one batch
 * (20 appends, about 0.5 ms of Redis on an idle machine; 50 measured 3 s p99 for single sends on a
 * loaded one).
 */
const IN_FLIGHT = 20;

/** What a completed fan-out job returns (BullMQ keeps it as the job's `returnvalue`). */
export interface FanoutResult {
  outcome: 'sent';
  total: number;
  reached: number;
  expired: number;
  deduplicated: number;
  muted: number;
  failed: number;
}

/** What {@link fanOut} uses of a BullMQ job (a `Job`, or the `SandboxedJob` of a worker thread). */
export interface FanoutJobHandle {
  data: FanoutJob;
  /** Attempts made before this one. */
  attemptsMade: number;
  moveToDelayed(timestamp: number, token?: string): Promise<void>;
}

/** What a fan-out needs: where recipients and inboxes live, the live channel, the chunk size. */
export interface FanoutContext {
  inbox: Inbox;
  topics: Topics;
  live: LivePublisher;
  limiters: SenderLimiters;
  /** Recipients per chunk: one page of the audience, charged, appended and checkpointed together. */
  chunkSize: number;
  /** `HERALD_REDIS_WAIT_REPLICAS`: each append waits for the replicas before its push, as single sends do. */
  durable?: Durability | undefined;
  /**
   * Redis's clock, which a `delayMs` is due by (see `holdIfEarly`) and `sentAt` is stamped with; absent:
   * BullMQ's word is taken, and this machine's clock.
   */
  now?: () => number;
  /**
   * Reports the recipients of one chunk that its `ttlMs` had passed for (`notification.expired`, one per
   * recipient, for a tenant whose webhook takes it). Awaited before the checkpoint: a failure fails the
   * attempt, and the chunk done again reports them again under the same webhook-ids.
   */
  expired?: (tenantId: string, notificationId: string, userIds: readonly string[]) => Promise<unknown>;
  /**
   * Reports the recipients of one chunk whose inbox Redis refused the notification for its data
   * (`notification.failed`, one per recipient: user id → why), as `expired` does: awaited before the
   * checkpoint, reported again under the same webhook-ids when the chunk is done again.
   */
  failed?: (
    tenantId: string,
    notificationId: string,
    failures: ReadonlyMap<string, string>,
    attempts: number,
  ) => Promise<unknown>;
}

/**
 * The senders' buckets, one limiter per distinct set of sender limits (a handful), on the gateway's keys:
 * the worker charges the very bucket the gateway reads. A limiter that cannot reach Redis throws, and
 * the job is retried from its checkpoint: nothing is sent unpaid, nothing is lost.
 */
export class SenderLimiters {
  readonly #redis: Redis | Cluster;
  readonly #limiters = new Map<string, RateLimiter>();

  constructor(redis: Redis | Cluster) {
    this.#redis = redis;
  }

  of(charge: FanoutCharge): RateLimiter {
    const id = `${charge.keyPrefix}|${charge.capacity}|${charge.ratePerSecond}|${charge.hashTag ?? ''}`;
    let limiter = this.#limiters.get(id);
    if (limiter === undefined) {
      limiter = new RateLimiter({
        redis: this.#redis,
        policies: [
          {
            name: 'sender',
            capacity: charge.capacity,
            ratePerSecond: charge.ratePerSecond,
            keyPrefix: charge.keyPrefix,
          },
        ],
        failure: { mode: 'throw', timeoutMs: 1000 },
        // The gateway's bucket on Redis Cluster: keyed under the sender's tenant (see its limits.ts).
        ...(charge.hashTag === undefined ? {} : { hashTag: charge.hashTag }),
        // The worker charges a chunk at a time: a local deny cache would only delay the retry it schedules.
        denyCache: false,
      });
      this.#limiters.set(id, limiter);
    }
    return limiter;
  }
}

/**
 * Expands one topic send or broadcast: a page of `chunkSize` recipients at a time (user id order), each
 * page paid from the sender's bucket (one token per recipient, the gateway's one prepaid), appended to
 * every recipient's inbox with the notification's own id, pushed live, then checkpointed (counts and the
 * last user id, one command). A crash or retry resumes after the checkpoint; the chunk it was in is done
 * again, and the append is idempotent per (notification id, user), so no recipient is skipped nor gets
 * it twice (a re-done chunk is charged again: at most one chunk). A recipient whose inbox Redis refuses
 * for its data (a key of the wrong type: no retry mends it) is skipped and recorded failed, so that one
 * broken inbox does not hold every recipient after it; any other failure (a lost connection, a
 * failover) fails the attempt, resumed from the checkpoint. A sender out of
 * tokens has the job moved to delayed until its bucket holds the chunk: the fan-out goes at the sender's
 * rate and holds no worker slot while it waits. `signal` aborted (shutdown): the job goes back to the queue after the
 * batch in flight.
 */
export async function fanOut(
  job: FanoutJobHandle,
  token: string | undefined,
  context: FanoutContext,
  signal?: AbortSignal,
): Promise<FanoutResult> {
  const data = job.data;
  // Handed over early by this machine's clock: back to the delayed set for the rest of its delay.
  if (context.now !== undefined) await holdIfEarly(job, token, context.now());
  const tenantId = data.tenantId ?? DEFAULT_TENANT;
  const inbox = context.inbox.tenant(tenantId);
  const topics = context.topics.tenant(tenantId);
  const limiter = context.limiters.of(data.charge);
  const chunkSize = Math.max(1, Math.min(context.chunkSize, data.charge.capacity));
  const options = { ...appendOptionsOf(data), indexed: false };
  const base: Omit<InboxNotification, 'userId'> = {
    id: data.id,
    payload: data.payload,
    createdAt: data.createdAt,
    ...('topic' in data.audience ? { topic: data.audience.topic } : {}),
    ...(data.type !== undefined ? { type: data.type } : {}),
  };

  const record = await topics.startFanout(data.id, data.audience, inbox.retentionMs);
  const counts = {
    total: record.total,
    reached: record.reached,
    expired: record.expired,
    deduplicated: record.deduplicated,
    muted: record.muted,
    failed: record.failed,
  };
  let cursor = record.cursor;
  let done = record.state === 'sent';
  while (!done) {
    const page = await topics.page(data.audience, cursor, chunkSize);
    const cost = page.userIds.length - (cursor === undefined ? data.charge.prepaid : 0);
    if (cost > 0) {
      const decision = await limiter.consume(data.charge.senderId, cost);
      if (!decision.allowed) {
        await job.moveToDelayed(Date.now() + Math.max(1, decision.retryAfterMs), token);
        throw new DelayedError();
      }
    }
    const results: (AppendResult | { outcome: 'failed'; reason: string })[] = [];
    for (let from = 0; from < page.userIds.length; from += IN_FLIGHT) {
      if (signal?.aborted) {
        // The worker is shutting down: back to the queue at once (no attempt spent), for whichever worker
        // is next to resume it from the checkpoint; this chunk's appends so far are not repeated.
        await job.moveToDelayed(Date.now(), token);
        throw new DelayedError();
      }
      const batchStarted = performance.now();
      const batch = page.userIds.slice(from, from + IN_FLIGHT);
      results.push(
        ...(await Promise.all(
          batch.map((userId) =>
            storeAndPush(inbox, context.live, { ...base, userId }, options, context.durable).catch(
              (error: unknown) => {
                if (!isRefusedForItsData(error)) throw error;
                return { outcome: 'failed' as const, reason: (error as Error).message };
              },
            ),
          ),
        )),
      );
      // Then a pause as long as the batch took: the fan-out holds Redis at most about half the time, and
      // backs off by itself when Redis is slow (busy with others). Single sends find Redis free between.
      await sleep(performance.now() - batchStarted);
    }
    const expired: string[] = [];
    const failures = new Map<string, string>();
    for (const [index, result] of results.entries()) {
      if (result.outcome === 'expired') {
        counts.expired += 1;
        expired.push(page.userIds[index] ?? '');
      } else if (result.outcome === 'failed') {
        counts.failed += 1;
        failures.set(page.userIds[index] ?? '', result.reason);
      } else if (result.outcome === 'deduplicated') counts.deduplicated += 1;
      else if (result.outcome === 'muted') counts.muted += 1;
      else counts.reached += 1;
    }
    if (expired.length > 0) await context.expired?.(tenantId, data.id, expired);
    if (failures.size > 0) await context.failed?.(tenantId, data.id, failures, job.attemptsMade + 1);
    cursor = page.userIds.at(-1) ?? cursor;
    done = page.nextAfter === null;
    if (done)
      counts.total = counts.reached + counts.expired + counts.deduplicated + counts.muted + counts.failed;
    await topics.checkpoint(
      data.id,
      { ...counts, cursor },
      done ? { atMs: context.now?.() ?? Date.now() } : undefined,
      failures,
    );
  }
  return { outcome: 'sent', ...counts };
}

/**
 * Whether Redis refused a recipient's store for what that recipient's inbox holds: a key of the wrong
 * type (`WRONGTYPE`), which no retry mends and no other recipient shares. Any other error is not: a
 * connection's, or a script error (a defect would refuse every recipient alike: the attempt fails, and
 * the fan-out stays retriable). Looks through `cause`s.
 */
export function isRefusedForItsData(error: unknown): boolean {
  for (let cause = error, depth = 0; cause instanceof Error && depth < 5; depth++) {
    // Raised in a script, Redis 7.0 answers `ERR user_script:<line>: WRONGTYPE …` (the append re-raises it).
    if (/(^|: )WRONGTYPE /.test(cause.message)) return true;
    cause = cause.cause;
  }
  return false;
}
