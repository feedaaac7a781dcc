import { layoutRegistryKey } from '@herald/config';
import { envelopeIndexKey } from '@herald/protocol';
import { Job, type JobsOptions, type Queue, QueueKeys } from 'bullmq';

/** A job to add: what `queue.add` takes (and an item of `queue.addBulk`). */
export interface JobSpec {
  name: string;
  data: unknown;
  opts?: JobsOptions;
}

/**
 * A job BullMQ refuses to add before it sends anything to Redis (its own checks of the options: a
 * priority above its limit, a job id it does not take…): nothing was accepted, and a retry would be
 * refused the same. Input the route schemas let through never should be: it is a defect of the gateway.
 */
export class JobRefusedError extends Error {
  constructor(
    readonly jobName: string,
    readonly jobId: string | undefined,
    cause: unknown,
  ) {
    super(
      `BullMQ refuses the ${jobName} job ${jobId ?? '(no id)'}: ${cause instanceof Error ? cause.message : String(cause)}`,
      { cause },
    );
    this.name = 'JobRefusedError';
  }
}

/** BullMQ's own checks of a job it is about to add, which `Job.create` and `Job.createBulk` run first. */
class CheckedJob extends Job {
  /** What BullMQ would throw before sending `spec` to Redis, or undefined when it takes it. */
  static refusal(queue: Queue, { name, data, opts }: JobSpec): unknown {
    // `Queue.addJob`'s own check, before it creates the job.
    const jobId = opts?.jobId;
    if (jobId === '0' || jobId?.startsWith('0:')) return new Error("JobId cannot be '0' or start with '0:'");
    try {
      const job = new CheckedJob(queue, name, data, opts, jobId);
      job.validateOptions(job.asJSON());
      return undefined;
    } catch (error) {
      return error;
    }
  }
}

/**
 * Throws {@link JobRefusedError} when BullMQ would refuse any of `jobs` on `queue`, running its own checks
 * (~2 µs a job): called before any of a request's jobs is sent, a refusal leaves nothing accepted, on
 * every partition. Without it, an error of `add()` could not be told from a Redis that took the job and
 * did not answer (a 503 "may or may not have been accepted" for a notification never stored).
 *
 * @example
 * ```ts
 * checkJobs(queue, [{ name: NOTIFY_JOB_NAME, data, opts }]); // throws before anything is sent
 * await queue.add(NOTIFY_JOB_NAME, data, opts);
 * ```
 */
export function checkJobs(queue: Queue, jobs: readonly JobSpec[]): void {
  for (const spec of jobs) {
    const refusal = CheckedJob.refusal(queue, spec);
    if (refusal !== undefined) throw new JobRefusedError(spec.name, spec.opts?.jobId, refusal);
  }
}

/** The name a key of queue `<prefix>:<queue>` has after them, as `key` makes it. */
function nameIn(key: (queue: { prefix: string; name: string }) => string): string {
  return key({ prefix: 'p', name: 'q' }).slice('p:q:'.length);
}

/**
 * The names of the keys a queue keeps beside its jobs (`<prefix>:<queue>:<name>`, where a job is
 * `<prefix>:<queue>:<job id>`): BullMQ's own (its `QueueKeys`: `meta`, `id`, `events`, `wait`,
 * `stalled-check`…; `priority` of its older versions; `layout` of its relay) and Herald's (the envelope
 * index, the registry of partition layouts).
 */
const QUEUE_KEY_NAMES: ReadonlySet<string> = new Set([
  ...Object.keys(new QueueKeys().getKeys('')),
  'priority',
  'layout',
  nameIn(envelopeIndexKey),
  nameIn(layoutRegistryKey),
]);

/**
 * False for an id that can be no job, so that no lookup by id addresses one of the queue's own keys:
 * one with `:` (BullMQ takes no such custom id; `<job id>:lock`, `<job id>:logs` are a job's own keys)
 * and the name of a queue's own key ({@link QUEUE_KEY_NAMES}). Looked up as a job, such an id read that
 * key: a `WRONGTYPE` error for a list, a set or a string (which the routes answered as Redis being
 * unavailable), a job that is none for a hash (the `meta` hash, the envelope index read whole).
 *
 * @example
 * ```ts
 * couldBeJobId(randomUUID()); // true
 * couldBeJobId('stalled-check'); // false
 * ```
 */
export function couldBeJobId(id: string): boolean {
  return id !== '' && !id.includes(':') && !QUEUE_KEY_NAMES.has(id);
}

/**
 * `read` (of a job by its id), or `none` when Redis answers `WRONGTYPE`: the id named a key of the
 * queue that holds no job (a name {@link couldBeJobId} does not know yet, of a later BullMQ).
 */
export async function unlessNoJob<T>(read: Promise<T>, none: T): Promise<T> {
  try {
    return await read;
  } catch (error) {
    if (error instanceof Error && error.message.startsWith('WRONGTYPE')) return none;
    throw error;
  }
}
