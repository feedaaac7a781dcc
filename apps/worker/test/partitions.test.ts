import { layoutRegistryKey, partitionOf, queuePartitions, recordLayout } from '@herald/config';
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
    expect(await queues[0]?.getJobState(jobs[0]?.id ?? '')).toBe('prioritized');
    expect(await queues[2]?.getJobState(jobs[2]?.id ?? '')).toBe('prioritized');
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

describe('a change of HERALD_QUEUE_PARTITIONS', () => {
  it('drains what is queued in the partitions of an earlier count (delayed and envelopes too), then stops', async () => {
    const redis = testRedis();
    const env = {
      ...redisEnv(),
      HERALD_QUEUE_NAME: randomId('queue'),
      HERALD_PUBSUB_KEY: randomId('pubsub'),
      HERALD_INBOX_PREFIX: `${randomId('inbox')}:`,
    };
    const before = loadConfig({ ...env, HERALD_QUEUE_PARTITIONS: '4' });
    const config = { ...loadConfig({ ...env, HERALD_QUEUE_PARTITIONS: '2' }), leftoverCheckMs: 200 };
    const old = queuePartitions(before.queue);
    const now = new Set(queuePartitions(config.queue).map((ref) => ref.prefix));
    // The point of the test: 4 partitions are not 2 of them plus 2 more (each count picks its own tags).
    const gone = [1, 2, 3].filter((partition) => !now.has(old[partition]?.prefix ?? ''));
    expect(gone.length).toBeGreaterThanOrEqual(2);
    const queues = old.map(({ name, prefix }) => new Queue(name, { prefix, connection: queueConnection() }));
    cleanups.push(async () => {
      for (const queue of queues) {
        await queue.obliterate({ force: true });
        await queue.close();
      }
      for (const ref of [...old, ...queuePartitions(config.queue)]) await redis.del(envelopeIndexKey(ref));
      await redis.del(layoutRegistryKey(config.queue));
      redis.disconnect();
    });
    // What a gateway with HERALD_QUEUE_PARTITIONS=4 left: a job in each partition it has and 2 has not,
    // one of them delayed, and an envelope of two notifications.
    await recordLayout(redis, before.queue);
    const userIn = (partition: number) => {
      for (;;) {
        const userId = randomId('user');
        if (partitionOf('default', userId, 4) === partition) return userId;
      }
    };
    const sent: NotificationJob[] = [];
    for (const partition of gone) {
      const job = item(userIn(partition), partition);
      sent.push(job);
      await queues[partition]?.add(NOTIFY_JOB_NAME, job, {
        ...notificationJobOptions(job),
        ...(partition === gone[0] ? { delay: 1500 } : {}),
      });
    }
    const last = gone[gone.length - 1] as number;
    const pair = [item(userIn(last), 10), item(userIn(last), 11)];
    sent.push(...pair);
    const envelopeId = `envelope-${randomId('e')}`;
    await redis.hset(
      envelopeIndexKey(old[last] ?? before.queue),
      pair[0]?.id ?? '',
      envelopeId,
      pair[1]?.id ?? '',
      envelopeId,
    );
    await (queues[last] as unknown as Queue<NotificationEnvelope>).add(
      NOTIFY_ENVELOPE_JOB_NAME,
      { items: pair },
      envelopeJobOptions(envelopeId),
    );

    const worker = await startWorker(config, pino({ level: 'silent' }));
    cleanups.push(() => worker.close());
    // A generous deadline: on a Cluster of a loaded machine the worker's first look took over 10 s once.
    await waitFor(async () => worker.leftovers.draining.length === gone.length, {
      timeoutMs: 30_000,
      what: 'a drain for each partition of the earlier count that holds jobs',
    });
    for (const job of sent) {
      await waitFor(async () => (await worker.inbox.list(job.userId, { limit: 10 })).items.length === 1, {
        what: `${job.id} stored`,
      });
      expect((await worker.inbox.list(job.userId, { limit: 10 })).items[0]?.id).toBe(job.id);
    }
    // Emptied, the drains stop; the count stays recorded (a gateway may still enqueue with it).
    await waitFor(async () => worker.leftovers.draining.length === 0, { what: 'the drains stopped' });
    expect(await redis.hexists(layoutRegistryKey(config.queue), '4')).toBe(1);
    expect(await redis.hlen(envelopeIndexKey(old[last] ?? before.queue))).toBe(0);
  });

  it('forgets a count no gateway has recorded for ten minutes once its partitions hold no job, failed ones included', async () => {
    const redis = testRedis();
    const config = {
      ...loadConfig({
        ...redisEnv(),
        HERALD_QUEUE_NAME: randomId('queue'),
        HERALD_PUBSUB_KEY: randomId('pubsub'),
        HERALD_INBOX_PREFIX: `${randomId('inbox')}:`,
      }),
      leftoverCheckMs: 200,
    };
    const registry = layoutRegistryKey(config.queue);
    cleanups.push(async () => {
      await redis.del(registry);
      redis.disconnect();
    });
    // Three earlier counts (none the current one, which the run may set): one unrecorded for 11 minutes
    // and empty, one recorded now, one unrecorded for 11 minutes with a job in a partition.
    const current = config.queue.partitions;
    const [stale, live, failing] = [current + 1, current + 2, current + 3].map(String) as [
      string,
      string,
      string,
    ];
    const long = String(Date.now() - 11 * 60_000);
    await redis.hset(registry, stale, long, live, String(Date.now()), failing, long);
    // That job can never be stored: drained, it fails, and its failed job keeps the count recorded (the
    // failed-jobs API and CLI list it).
    const lastPartition = queuePartitions({ ...config.queue, partitions: current + 3 })[current + 2];
    if (lastPartition === undefined) throw new Error('no last partition');
    const old = new Queue(lastPartition.name, {
      prefix: lastPartition.prefix,
      connection: queueConnection(),
    });
    cleanups.push(async () => {
      await old.obliterate({ force: true });
      await old.close();
    });
    await old.add(NOTIFY_JOB_NAME, item('', 1), notificationJobOptions(item('', 1)));
    const worker = await startWorker(config, pino({ level: 'silent' }));
    cleanups.push(() => worker.close());
    await waitFor(async () => (await redis.hexists(registry, stale)) === 0, {
      what: 'the stale count forgotten',
    });
    await waitFor(async () => (await old.getFailedCount()) === 1, { what: 'the job failed' });
    await waitFor(async () => worker.leftovers.draining.length === 0, { what: 'its drain stopped' });
    expect(await redis.hexists(registry, live)).toBe(1);
    expect(await redis.hexists(registry, failing)).toBe(1);
    await old.obliterate({ force: true });
    await waitFor(async () => (await redis.hexists(registry, failing)) === 0, {
      what: 'the count with the failed job forgotten once emptied',
    });
  });
});
