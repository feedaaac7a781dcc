import { partitionOf, queuePartitions } from '@herald/config';
import {
  envelopeIndexKey,
  envelopeJobOptions,
  NOTIFY_ENVELOPE_JOB_NAME,
  NOTIFY_JOB_NAME,
  type NotificationEnvelope,
  type NotificationJob,
  notificationJobOptions,
} from '@herald/protocol';
import { queueConnection, randomId, redisEnv, testRedis, waitFor } from '@herald/testing';
import { Queue } from 'bullmq';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { startWorker } from '../src/worker.js';

const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const item = (userId: string, n: number): NotificationJob => ({
  id: randomId('n'),
  userId,
  payload: { n },
  createdAt: new Date().toISOString(),
  seq: n,
});

/** A worker on its own queue of four partitions, consuming `share`, and a Queue for each partition. */
async function partitioned(share: string) {
  const config = loadConfig({
    ...redisEnv(),
    HERALD_QUEUE_NAME: randomId('queue'),
    HERALD_PUBSUB_KEY: randomId('pubsub'),
    HERALD_INBOX_PREFIX: `${randomId('inbox')}:`,
    HERALD_QUEUE_PARTITIONS: '4',
    HERALD_WORKER_PARTITIONS: share,
  });
  const redis = testRedis();
  const queues = queuePartitions(config.queue).map(
    ({ name, prefix }) => new Queue(name, { prefix, connection: queueConnection() }),
  );
  const worker = await startWorker(config, pino({ level: 'silent' }));
  cleanups.push(async () => {
    await worker.close();
    for (const queue of queues) {
      await queue.obliterate({ force: true });
      await queue.close();
    }
    for (const partition of queuePartitions(config.queue)) await redis.del(envelopeIndexKey(partition));
    redis.disconnect();
  });
  /** A user of `partition` (of four). */
  const userIn = (partition: number) => {
    for (;;) {
      const userId = randomId('user');
      if (partitionOf('default', userId, 4) === partition) return userId;
    }
  };
  return { config, redis, queues, worker, userIn };
}

describe('HERALD_QUEUE_PARTITIONS=4', () => {
  it('a worker consumes every partition by default, each user stored in send order', async () => {
    const { queues, worker, userIn } = await partitioned('all');
    expect(worker.workers).toHaveLength(4);
    const users = [0, 1, 2, 3].map(userIn);
    const sent = new Map<string, string[]>();
    for (const [partition, userId] of users.entries()) {
      const jobs = Array.from({ length: 5 }, (_, n) => item(userId, n));
      sent.set(
        userId,
        jobs.map((job) => job.id),
      );
      await queues[partition]?.addBulk(
        jobs.map((job) => ({ name: NOTIFY_JOB_NAME, data: job, opts: notificationJobOptions(job) })),
      );
    }
    for (const userId of users) {
      await waitFor(async () => (await worker.inbox.list(userId, { limit: 10 })).items.length === 5, {
        what: `${userId}'s five`,
      });
      const stored = (await worker.inbox.list(userId, { limit: 10 })).items.map((entry) => entry.id);
      expect(stored).toEqual(sent.get(userId));
    }
  });

  it('HERALD_WORKER_PARTITIONS=1,3 takes partitions 1 and 3 only; the others stay waiting', async () => {
    const { queues, worker, userIn } = await partitioned('1,3');
    expect(worker.workers.map((partitionWorker) => partitionWorker.opts.prefix)).toEqual([
      queues[1]?.opts.prefix,
      queues[3]?.opts.prefix,
    ]);
    const jobs = [0, 1, 2, 3].map((partition) => item(userIn(partition), partition));
    for (const [partition, job] of jobs.entries()) {
      await queues[partition]?.add(NOTIFY_JOB_NAME, job, notificationJobOptions(job));
    }
    await waitFor(
      async () =>
        (await queues[1]?.getJobState(jobs[1]?.id ?? '')) === 'completed' &&
        (await queues[3]?.getJobState(jobs[3]?.id ?? '')) === 'completed',
      { what: 'partitions 1 and 3 consumed' },
    );
    expect(await queues[0]?.getJobState(jobs[0]?.id ?? '')).toBe('waiting');
    expect(await queues[2]?.getJobState(jobs[2]?.id ?? '')).toBe('waiting');
  });

  it("an envelope's notification that cannot be stored is retried as its own job in the envelope's partition", async () => {
    const { config, redis, queues, userIn } = await partitioned('all');
    const good = item(userIn(2), 1);
    const bad = { ...item('', 2) };
    const envelopeId = `envelope-${randomId('e')}`;
    const index = envelopeIndexKey(queuePartitions(config.queue)[2] ?? config.queue);
    await redis.hset(index, good.id, envelopeId, bad.id, envelopeId);
    const envelopes = queues[2] as unknown as Queue<NotificationEnvelope>;
    await envelopes.add(
      NOTIFY_ENVELOPE_JOB_NAME,
      { items: [good, bad] },
      envelopeJobOptions(envelopeId, { attempts: 2, backoffMs: 10, jitter: 0 }),
    );
    await waitFor(async () => (await queues[2]?.getJobState(bad.id)) === 'failed', {
      what: 'the bad one failed as its own job in partition 2',
    });
    await waitFor(async () => (await redis.hlen(index)) === 0, { what: 'the index of partition 2 emptied' });
    for (const partition of [0, 1, 3]) expect(await queues[partition]?.getJob(bad.id)).toBeUndefined();
  });
});
