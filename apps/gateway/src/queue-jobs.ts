import { Job, type JobsOptions, type Queue } from 'bullmq';

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
