import {
  earlierLayouts,
  isOutOfMemory,
  QUEUE_OPTIONS,
  queuePartitions,
  withoutPassword,
} from '@herald/config';
import { failedJobs, retryFailed } from '@herald/gateway/operator';
import { type NotificationJob, notificationIdOf } from '@herald/protocol';
import { loadConfig } from '@herald/worker/operator';
import { Queue } from 'bullmq';
import type { CliIo, Env } from './io.js';
import { connectForCli, parseCommand, redisFailure, redisTarget, settingsFor } from './io.js';

const USAGE = `usage: herald failed list [--limit N]     list notifications that failed after all their attempts
       herald failed retry <id>...         put these failed notifications back in the queue
       herald failed retry --all           put every failed notification back in the queue
Reads REDIS_URL (or HERALD_REDIS_CLUSTER_NODES), HERALD_QUEUE_NAME, HERALD_QUEUE_PREFIX and HERALD_QUEUE_PARTITIONS like the worker.`;

/**
 * `herald failed list|retry`: the operator's view of the failed set (BullMQ's `failed` jobs of the
 * notification queue: notifications that could not be delivered after all their attempts).
 * Answers the exit code: 0 done, 1 failed (Redis unreachable, unknown or not-failed id), 2 usage.
 *
 * @example
 * ```ts
 * process.exitCode = await run(process.argv.slice(3), { out: console.log, err: console.error });
 * ```
 */
export async function run(args: string[], io: CliIo, env: Env = process.env): Promise<number> {
  const parsed = parseCommand(
    args,
    ['list', 'retry'],
    { limit: { type: 'string' }, all: { type: 'boolean' } },
    USAGE,
    io,
    args[0] === 'retry',
  );
  if (typeof parsed === 'number') return parsed;
  const { command, values, positionals: ids } = parsed;
  const limit = values.limit === undefined ? 50 : Number(values.limit);
  const problem = usageProblem(command, values, ids.length);
  if (problem !== undefined) {
    io.err(problem);
    io.err(USAGE);
    return 2;
  }

  const config = settingsFor(() => loadConfig(env), io);
  if (config === undefined) return 1;
  // One fail-fast connection (one Redis or the Cluster of HERALD_REDIS_CLUSTER_NODES) for every
  // partition of the queue (`HERALD_QUEUE_PARTITIONS`); BullMQ leaves it open, closed below.
  const redis = await connectForCli(redisTarget(config), io);
  if (redis === undefined) return 1;
  // And the partitions of earlier HERALD_QUEUE_PARTITIONS counts still recorded: jobs that failed there
  // before the count changed.
  const earlier = await earlierLayouts(redis, config.queue).catch(() => []);
  const refs = [...queuePartitions(config.queue), ...earlier.flatMap((layout) => layout.leftovers)];
  const queues = refs.map(({ name, prefix }) => {
    const queue = new Queue<NotificationJob>(name, { ...QUEUE_OPTIONS, prefix, connection: redis });
    queue.on('error', () => {});
    return queue;
  });
  try {
    await Promise.all(queues.map((queue) => queue.waitUntilReady()));
    return command === 'list'
      ? await list(queues, limit, io)
      : await retry(queues, values.all ? ['--all'] : ids, io);
  } catch (error) {
    io.err(
      isOutOfMemory(error)
        ? redisFailure(redisTarget(config), error)
        : `Could not reach the queue at ${withoutPassword(config.redisUrl)}: ${(error as Error).message}`,
    );
    return 1;
  } finally {
    await Promise.all(queues.map((queue) => queue.close().catch(() => {})));
    redis.disconnect();
  }
}

async function list(queues: Queue<NotificationJob>[], limit: number, io: CliIo): Promise<number> {
  const { count, jobs } = await failedJobs(queues, limit);
  const where = queues.length > 1 ? ` (${queues.length} partitions)` : '';
  io.out(
    `${count} failed notification(s) in queue "${queues[0]?.name}"${where}${count > jobs.length ? `, showing ${jobs.length}` : ''}`,
  );
  if (jobs.length > 0) io.out(['id', 'userId', 'attempts', 'failedAt', 'reason'].join('\t'));
  for (const job of jobs) {
    io.out([job.id, job.userId, job.attempts, job.failedAt ?? '-', job.reason].join('\t'));
  }
  return 0;
}

async function retry(queues: Queue<NotificationJob>[], ids: string[], io: CliIo): Promise<number> {
  if (ids[0] === '--all') {
    let count = 0;
    for (const queue of queues) {
      // Each job by itself, not BullMQ's retryJobs: that one puts every job back in the `wait` list,
      // which workers empty before any prioritized job, whatever its priority; `Job.retry` puts a job
      // back where its own priority says (every Herald job has one: DEFAULT_PRIORITY).
      // Oldest failed first (BullMQ lists the newest first): back in the queue in the order they failed,
      // so that a user's notifications are stored in their send order again.
      const oldest = () => queue.getJobs(['failed'], 0, 99, true);
      for (let page = await oldest(); page.length > 0; page = await oldest()) {
        // One after another: each one's place in the queue is the order of its retry.
        const retried: number[] = [];
        for (const job of page) {
          retried.push(
            await job.retry('failed').then(
              () => 1,
              // Retried (or removed) meanwhile by someone else: not ours to count.
              () => 0,
            ),
          );
        }
        count += retried.reduce((sum: number, one: number) => sum + one, 0);
        // None could be moved: those left are not ours to move (their state changed under us).
        if (retried.every((one) => one === 0)) break;
      }
    }
    io.out(`retried ${count} failed notification(s)`);
    return 0;
  }
  let code = 0;
  for (const given of ids) {
    const id = notificationIdOf(given);
    const outcome = await retryFailed(queues, id);
    if (!outcome.retried) {
      const carrier = outcome.envelopeId === undefined ? '' : `, in envelope ${outcome.envelopeId}`;
      io.err(
        `${id}: ${outcome.state === 'missing' ? 'no such notification in the queue (never sent, or stored already: its tenant’s GET /notifications/:id tells its status)' : `not failed (it is ${outcome.state}${carrier})`}; nothing done`,
      );
      code = 1;
      continue;
    }
    io.out(
      `retried ${id}${outcome.envelopeId === undefined ? '' : ` (with its envelope ${outcome.envelopeId})`}`,
    );
  }
  return code;
}

/** What is wrong with a `failed` command line, in words, or undefined when it is usable. */
function usageProblem(
  command: string,
  values: { limit?: string | undefined; all?: boolean | undefined },
  ids: number,
): string | undefined {
  if (command === 'list') {
    if (values.all !== undefined) return '--all goes with retry, not list';
    if (values.limit !== undefined && !(/^\d+$/.test(values.limit) && Number(values.limit) >= 1)) {
      return `--limit must be a whole number from 1, got "${values.limit}"`;
    }
    return undefined;
  }
  if (values.limit !== undefined) return '--limit goes with list, not retry';
  if (values.all === true && ids > 0) return 'retry takes notification ids or --all, not both';
  if (values.all !== true && ids === 0) return 'retry needs notification ids or --all';
  return undefined;
}
