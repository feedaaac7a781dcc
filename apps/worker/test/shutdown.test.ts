import { fileURLToPath } from 'node:url';
import { Inbox } from '@herald/inbox';
import { NOTIFY_JOB_NAME, type NotificationJob, notificationJobOptions } from '@herald/protocol';
import {
  queueConnection,
  randomId,
  redisEnv,
  startApp,
  startRedisServer,
  testRedis,
  waitFor,
} from '@herald/testing';
import { Queue } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';

const entry = fileURLToPath(new URL('../dist/server.js', import.meta.url));

describe('worker process', () => {
  const env = {
    ...redisEnv(),
    HERALD_QUEUE_NAME: randomId('queue'),
    HERALD_INBOX_PREFIX: `${randomId('inbox')}:`,
    HERALD_PUBSUB_KEY: randomId('pubsub'),
  };
  const queue = new Queue<NotificationJob>(env.HERALD_QUEUE_NAME, {
    prefix: '{herald}',
    connection: queueConnection(),
  });
  const redis = testRedis();
  const inbox = new Inbox(redis, { prefix: env.HERALD_INBOX_PREFIX });
  afterAll(async () => {
    await queue.obliterate({ force: true });
    await queue.close();
    redis.disconnect();
  });

  it('on SIGTERM finishes its active jobs, exits 0, and leaves the rest queued for the next worker', async () => {
    const user = randomId('u');
    const jobs: NotificationJob[] = Array.from({ length: 1000 }, (_, n) => ({
      id: randomId('n'),
      userId: user,
      payload: { n },
      createdAt: new Date().toISOString(),
    }));
    await queue.addBulk(
      jobs.map((job) => ({ name: NOTIFY_JOB_NAME, data: job, opts: notificationJobOptions(job) })),
    );
    const first = await startApp({ name: 'worker-1', entry, env });
    await waitFor(async () => (await queue.getCompletedCount()) >= 100, {
      timeoutMs: 30_000,
      what: '100 done',
    });
    expect(await first.stop('SIGTERM')).toBe(0);
    expect(first.lines.some((line) => line.includes('shutting down'))).toBe(true);
    expect(await queue.getActiveCount()).toBe(0);

    const second = await startApp({ name: 'worker-2', entry, env });
    try {
      await waitFor(async () => (await queue.getCompletedCount()) === 1000, {
        timeoutMs: 60_000,
        what: 'all done',
      });
    } finally {
      await second.stop();
    }
    const ids = (await inbox.read(user, { limit: 1000 })).entries.map((e) => e.id);
    expect(ids).toHaveLength(1000);
    expect(new Set(ids)).toEqual(new Set(jobs.map((job) => job.id)));
  });
});

describe('worker process on a Redis that freezes', () => {
  it('SIGTERM while its active jobs wait on a frozen Redis (SIGSTOP): it exits 0 by itself within its grace, the jobs still in Redis', async () => {
    const own = await startRedisServer();
    const queueName = randomId('queue');
    const queue = new Queue<NotificationJob>(queueName, { prefix: '{herald}', connection: { url: own.url } });
    try {
      const jobs: NotificationJob[] = Array.from({ length: 2000 }, (_, n) => ({
        id: randomId('n'),
        userId: `u${n % 20}`,
        payload: { n },
        createdAt: new Date().toISOString(),
      }));
      await queue.addBulk(
        jobs.map((job) => ({ name: NOTIFY_JOB_NAME, data: job, opts: notificationJobOptions(job) })),
      );
      const worker = await startApp({
        name: 'worker-frozen',
        entry,
        env: { REDIS_URL: own.url, HERALD_QUEUE_NAME: queueName },
      });
      await waitFor(async () => (await queue.getCompletedCount()) >= 50, {
        timeoutMs: 30_000,
        what: '50 done',
      });
      // Its jobs in flight now wait on Redis for good: BullMQ's close waits for them.
      own.process.kill('SIGSTOP');
      // A longer grace than the app's own (10 s): it must end by itself, not be killed.
      const code = await worker.stop('SIGTERM', 30_000);
      expect(code).toBe(0);
      expect(worker.lines.some((line) => line.includes('did not close in time'))).toBe(true);
      own.process.kill('SIGCONT');
      // Nothing lost at the shutdown: every job is done, or still in Redis to be run (active ones come
      // back once their lock expires).
      // Waiting ones are in BullMQ's prioritized set: every job has a priority (DEFAULT_PRIORITY).
      const counts = await queue.getJobCounts('completed', 'active', 'prioritized');
      expect((counts.completed ?? 0) + (counts.active ?? 0) + (counts.prioritized ?? 0)).toBe(2000);
      expect(counts.prioritized).toBeGreaterThan(0);
    } finally {
      own.process.kill('SIGCONT');
      await queue.close();
      await own.dispose();
    }
  }, 90_000);
});
