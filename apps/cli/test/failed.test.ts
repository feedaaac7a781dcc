import { layoutRegistryKey, queuePartitions, recordLayout } from '@herald/config';
import { NOTIFY_JOB_NAME, type NotificationJob, notificationJobOptions } from '@herald/protocol';
import { isolatedEnv, randomId, testRedis, waitFor } from '@herald/testing';
import { startWorker } from '@herald/worker';
import { loadConfig } from '@herald/worker/operator';
import { Queue } from 'bullmq';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { run } from '../src/failed.js';

describe('herald failed list|retry', () => {
  const saved = { ...process.env };
  let queue: Queue<NotificationJob>;
  let env: Record<string, string>;
  let connection: ReturnType<typeof testRedis>;

  beforeEach(() => {
    // The run's Redis (or Redis Cluster, with its partitions), a queue of this test's own.
    env = isolatedEnv();
    Object.assign(process.env, env);
    // Partition 0 of the queue: the worker takes every partition, `herald failed` reads them all.
    connection = testRedis({ maxRetriesPerRequest: null });
    queue = new Queue(env.HERALD_QUEUE_NAME as string, { prefix: '{herald}', connection });
  });
  afterEach(async () => {
    process.env = { ...saved };
    await queue.obliterate({ force: true });
    await queue.close();
    connection.disconnect();
  });

  function capture() {
    const out: string[] = [];
    const err: string[] = [];
    return { out, err, io: { out: (line: string) => out.push(line), err: (line: string) => err.push(line) } };
  }

  /** Enqueues `count` jobs the worker can never store (empty userId: failed at once, no retries). */
  async function failedJobs(count: number): Promise<string[]> {
    const jobs: NotificationJob[] = Array.from({ length: count }, () => ({
      id: randomId('n'),
      userId: '',
      payload: {},
      createdAt: new Date().toISOString(),
    }));
    for (const job of jobs) await queue.add(NOTIFY_JOB_NAME, job, notificationJobOptions(job));
    const worker = await startWorker(
      loadConfig({ ...env, HERALD_INBOX_PREFIX: `${randomId('inbox')}:` }),
      pino({ level: 'silent' }),
    );
    try {
      await waitFor(async () => (await queue.getFailedCount()) === count, {
        timeoutMs: 20_000,
        what: 'failed',
      });
    } finally {
      await worker.close();
    }
    return jobs.map((job) => job.id);
  }

  it('lists what failed in a partition of an earlier HERALD_QUEUE_PARTITIONS (drained by the worker)', async () => {
    const config = loadConfig({ ...env, HERALD_INBOX_PREFIX: `${randomId('inbox')}:` });
    const now = new Set(queuePartitions(config.queue).map((ref) => ref.prefix));
    const earlier = { ...config.queue, partitions: config.queue.partitions + 1 };
    const ref = queuePartitions(earlier).find((candidate) => !now.has(candidate.prefix));
    if (ref === undefined) throw new Error('every partition of the earlier count is a current one');
    await recordLayout(connection, earlier);
    const old = new Queue<NotificationJob>(ref.name, { prefix: ref.prefix, connection });
    const job: NotificationJob = {
      id: randomId('n'),
      userId: '',
      payload: {},
      createdAt: new Date().toISOString(),
    };
    await old.add(NOTIFY_JOB_NAME, job, notificationJobOptions(job));
    const worker = await startWorker(config, pino({ level: 'silent' }));
    try {
      await waitFor(async () => (await old.getFailedCount()) === 1, {
        timeoutMs: 20_000,
        what: 'failed there',
      });
      const listed = capture();
      expect(await run(['list'], listed.io)).toBe(0);
      expect(listed.out[0]).toMatch(/^1 failed notification/);
      expect(listed.out.join('\n')).toContain(job.id);
    } finally {
      await worker.close();
      await old.obliterate({ force: true });
      await old.close();
      await connection.del(layoutRegistryKey(config.queue));
    }
  });

  it('lists notifications that failed after their attempts and retries them', async () => {
    const [id] = await failedJobs(1);
    const listed = capture();
    expect(await run(['list'], listed.io)).toBe(0);
    expect(listed.out[0]).toMatch(/^1 failed notification/);
    expect(listed.out[2]).toContain(id);
    expect(listed.out[2]).toContain('HERALD_ERR_INBOX_INVALID_ARGUMENT');

    const retried = capture();
    expect(await run(['retry', id ?? ''], retried.io)).toBe(0);
    expect(retried.out).toEqual([`retried ${id}`]);
    expect(await queue.getJobState(id ?? '')).toBe('prioritized');

    const again = capture();
    expect(await run(['retry', id ?? '', 'nope'], again.io)).toBe(1);
    expect(again.err.join('\n')).toMatch(/not failed \(it is waiting\)/);
    expect(again.err.join('\n')).toMatch(/nope: no such notification/);
  });

  it('retries every failed notification with --all', async () => {
    const ids = await failedJobs(3);
    const listed = capture();
    expect(await run(['list', '--limit', '2'], listed.io)).toBe(0);
    expect(listed.out[0]).toMatch(/^3 failed notification.*showing 2/);
    // The order they failed in (oldest first): the order they must go back in, so that a user's
    // notifications are stored in send order again.
    const failedOrder = (await queue.getJobs(['failed'], 0, -1, true)).map((job) => job.id);
    expect(new Set(failedOrder)).toEqual(new Set(ids));
    const result = capture();
    expect(await run(['retry', '--all'], result.io)).toBe(0);
    expect(result.out[0]).toMatch(/retried 3/);
    await waitFor(async () => (await queue.getFailedCount()) === 0, { what: 'failed set empty' });
    for (const id of ids) expect(await queue.getJobState(id)).toBe('prioritized');
    // Taken by the workers oldest first (BullMQ's prioritized set, one priority: in the order retried).
    const queued = await queue.getJobs(['prioritized'], 0, -1, true);
    expect(queued.map((job) => job.id)).toEqual(failedOrder);
  });

  it('answers usage errors with 2 and an unreachable Redis with 1', async () => {
    const usage = capture();
    expect(await run([], usage.io)).toBe(2);
    expect(usage.err[0]).toMatch(/usage: herald failed list/);
    // Each says what is wrong, before the usage.
    for (const [args, problem] of [
      [['list', '--limit', 'x'], '--limit must be a whole number from 1, got "x"'],
      [['list', '--limit', '0'], '--limit must be a whole number from 1, got "0"'],
      [['list', '--all'], '--all goes with retry, not list'],
      [['retry'], 'retry needs notification ids or --all'],
      [['retry', 'a', '--all'], 'retry takes notification ids or --all, not both'],
      [['retry', 'a', '--limit', '3'], '--limit goes with list, not retry'],
    ] as const) {
      const wrong = capture();
      expect(await run([...args], wrong.io), args.join(' ')).toBe(2);
      expect(wrong.err[0], args.join(' ')).toBe(problem);
    }

    process.env.REDIS_URL = 'redis://127.0.0.1:1';
    delete process.env.HERALD_REDIS_CLUSTER_NODES;
    const down = capture();
    expect(await run(['list'], down.io)).toBe(1);
    expect(down.err[0]).toMatch(/^Cannot reach Redis at redis:\/\/127\.0\.0\.1:1: .*Set REDIS_URL\.$/);
    // On a Cluster: which nodes, and which setting.
    process.env.HERALD_REDIS_CLUSTER_NODES = '127.0.0.1:1,127.0.0.1:2';
    const noCluster = capture();
    expect(await run(['list'], noCluster.io)).toBe(1);
    expect(noCluster.err[0]).toMatch(
      /^Cannot reach the Redis Cluster at 127\.0\.0\.1:1,127\.0\.0\.1:2: .*Set HERALD_REDIS_CLUSTER_NODES\.$/,
    );
  });
});
