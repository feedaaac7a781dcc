import type { NotificationJob } from '@herald/protocol';
import { DelayedError } from 'bullmq';

/**
 * How far off this worker's clock may put a delayed job before it is put back, ms: BullMQ hands it over
 * when the worker's `Date.now()` reaches its due time, so a worker whose clock is ahead of Redis's by
 * less than this runs it that much early (a put-back costs two Redis round trips and a worker's turn).
 */
const TOLERANCE_MS = 100;

/** What a put-back uses of a BullMQ job (a `Job`, or the `SandboxedJob` of a worker thread). */
interface DelayableJob {
  moveToDelayed(timestamp: number, token?: string): Promise<unknown>;
}

/**
 * How long before `dueAtMs` it is by Redis's clock now (`redisNowMs`), ms; 0 when it is due or within
 * {@link TOLERANCE_MS}, or when `dueAtMs` is not a time.
 */
export function untilDueMs(dueAtMs: number, redisNowMs: number): number {
  const early = dueAtMs - redisNowMs;
  return Number.isFinite(early) && early > TOLERANCE_MS ? Math.ceil(early) : 0;
}

/**
 * How long before its due time (`createdAt` + `delayMs`, both Redis's clock: the gateway stamps
 * `createdAt` with it) a job was handed over, by Redis's clock now (`redisNowMs`); 0 when it is due, has
 * no delay or is within {@link TOLERANCE_MS}. A worker 30 s ahead of Redis ran a 20 s delay at once.
 *
 * @example
 * ```ts
 * const early = earlyByMs(job.data, clock.now());
 * if (early > 0) { await job.moveToDelayed(Date.now() + early, token); throw new DelayedError(); }
 * ```
 */
export function earlyByMs(job: Pick<NotificationJob, 'createdAt' | 'delayMs'>, redisNowMs: number): number {
  if (job.delayMs === undefined || job.delayMs <= 0) return 0;
  return untilDueMs(Date.parse(job.createdAt) + job.delayMs, redisNowMs);
}

/**
 * Puts `job` back into the delayed set for the `early` ms left (by this machine's clock, which BullMQ
 * promotes it by) and throws BullMQ's `DelayedError`; returns when `early` is 0.
 */
export async function holdFor(job: DelayableJob, token: string | undefined, early: number): Promise<void> {
  if (early <= 0) return;
  await job.moveToDelayed(Date.now() + early, token);
  throw new DelayedError();
}

/** {@link holdFor} a notification job handed over early (see {@link earlyByMs}). */
export function holdIfEarly(
  job: DelayableJob & { data: Pick<NotificationJob, 'createdAt' | 'delayMs'> },
  token: string | undefined,
  redisNowMs: number,
): Promise<void> {
  return holdFor(job, token, earlyByMs(job.data, redisNowMs));
}
