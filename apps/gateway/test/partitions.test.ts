import { layoutRegistryKey, partitionOf, queuePartitions } from '@herald/config';
import {
  envelopeIndexKey,
  type FailedJobs,
  NOTIFY_ENVELOPE_JOB_NAME,
  NOTIFY_JOB_NAME,
  type NotificationEnvelope,
  type NotificationJob,
  notificationJobOptions,
} from '@herald/protocol';
import { queueConnection, randomId, waitFor } from '@herald/testing';
import { type Job, Queue, Worker } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import { afterAll, describe, expect, it } from 'vitest';
import { auth, testAppForFile } from './helpers.js';

// Four partitions on one Redis: where each notification goes, and what finds it there. No worker runs
// here except the failing ones a test starts, so jobs stay where the gateway put them.
const ADMIN_KEY = 'admin-key-0123456789abcdef0123456789abcdef';
const PARTITIONS = 4;
const limits = { HERALD_RATE_LIMIT_BURST: '1000', HERALD_SENDER_RATE_LIMIT_BURST: '1000' };
const single: FastifyInstance = await testAppForFile({
  ...limits,
  HERALD_QUEUE_PARTITIONS: String(PARTITIONS),
  HERALD_ADMIN_KEY: ADMIN_KEY,
  HERALD_JOB_ATTEMPTS: '1',
});
const enveloping: FastifyInstance = await testAppForFile({
  ...limits,
  HERALD_QUEUE_PARTITIONS: String(PARTITIONS),
  HERALD_ENVELOPE_WINDOW_MS: '50',
});
afterAll(async () => {
  await single.queueConnection.del(layoutRegistryKey(single.config.queue));
  await enveloping.queueConnection.del(layoutRegistryKey(enveloping.config.queue));
  await Promise.all(
    queuePartitions(enveloping.config.queue).map((queue) =>
      enveloping.queueConnection.del(envelopeIndexKey(queue)),
    ),
  );
});

const admin = { authorization: `Bearer ${ADMIN_KEY}` };
const users = Array.from({ length: 40 }, (_, i) => randomId(`user${i}`));
const partition = (userId: string) => partitionOf('default', userId, PARTITIONS);

describe('HERALD_QUEUE_PARTITIONS=4', () => {
  it('records the count it enqueues with, for the workers of a later count to drain its partitions', async () => {
    const registry = layoutRegistryKey(single.config.queue);
    await waitFor(async () => (await single.queueConnection.hexists(registry, String(PARTITIONS))) === 1, {
      what: 'the count recorded',
    });
    const at = Number(await single.queueConnection.hget(registry, String(PARTITIONS)));
    expect(Math.abs(Date.now() - at)).toBeLessThan(5 * 60_000);
  });

  it('finds, cancels and lists what an earlier count left queued in partitions it no longer has', async () => {
    const earlier = queuePartitions({ ...single.config.queue, partitions: 2 })[1];
    if (earlier === undefined) throw new Error('no partition 1 of 2');
    expect(single.queues.map((queue) => queue.opts.prefix)).not.toContain(earlier.prefix);
    const registry = layoutRegistryKey(single.config.queue);
    await single.queueConnection.hset(registry, '2', String(Date.now()));
    const old = new Queue<NotificationJob>(earlier.name, {
      prefix: earlier.prefix,
      connection: queueConnection(),
    });
    const userId = randomId('user');
    const job: NotificationJob = {
      id: randomId('n'),
      userId,
      payload: { n: 1 },
      createdAt: new Date().toISOString(),
    };
    const failing: NotificationJob = { ...job, id: randomId('n') };
    await old.add(NOTIFY_JOB_NAME, job, { ...notificationJobOptions(job), delay: 60_000 });
    await old.add(NOTIFY_JOB_NAME, failing, { ...notificationJobOptions(failing), attempts: 1 });
    const failer = new Worker(
      earlier.name,
      async () => {
        throw new Error('boom');
      },
      { prefix: earlier.prefix, connection: queueConnection() },
    );
    try {
      await waitFor(async () => (await old.getJobState(failing.id)) === 'failed', { what: 'one failed' });
    } finally {
      await failer.close();
    }
    await single.recordPartitions();
    expect(single.earlierQueues().map((queue) => queue.opts.prefix)).toContain(earlier.prefix);

    const status = await single.inject({ method: 'GET', url: `/notifications/${job.id}`, headers: auth });
    expect(status.statusCode).toBe(200);
    expect(status.json()).toMatchObject({ id: job.id, status: 'queued' });
    // The queue depth on /metrics counts it (the only delayed job of this gateway's queues).
    const metrics = (await single.inject({ method: 'GET', url: '/metrics' })).body;
    expect(metrics).toMatch(/herald_queue_jobs\{state="delayed"\} 1\b/);
    const failed = await single.inject({ method: 'GET', url: '/admin/failed', headers: admin });
    expect(failed.json<{ jobs: { id: string }[] }>().jobs.map((entry) => entry.id)).toContain(failing.id);
    const cancelled = await single.inject({
      method: 'DELETE',
      url: `/notifications/${job.id}`,
      headers: auth,
    });
    expect(cancelled.statusCode).toBe(200);
    expect(await old.getJob(job.id)).toBeUndefined();

    await old.obliterate({ force: true });
    await old.close();
    await single.queueConnection.hdel(registry, '2');
    await single.recordPartitions();
    expect(single.earlierQueues()).toHaveLength(0);
  });

  it('has four queues, partition 0 the configured one, each under its own hash tag', () => {
    expect(single.queues).toHaveLength(PARTITIONS);
    expect(single.queue).toBe(single.queues[0]);
    expect(single.queue.name).toBe(single.config.queue.name);
    expect(new Set(single.queues.map((queue) => queue.opts.prefix)).size).toBe(PARTITIONS);
  });

  it('puts each job in its recipient partition; a batch is split between them; status and cancel find any', async () => {
    const batch = await single.inject({
      method: 'POST',
      url: '/notify/batch',
      headers: auth,
      payload: { notifications: users.map((userId) => ({ userId, payload: { batch: true } })) },
    });
    expect(batch.statusCode).toBe(202);
    const { results } = batch.json<{ results: { index: number; id: string }[] }>();
    expect(results).toHaveLength(users.length);
    for (const { index, id } of results) {
      const userId = users[index] ?? '';
      const holders = await Promise.all(single.queues.map((queue) => queue.getJob(id)));
      // In its user's partition and no other.
      expect(holders.map((job) => job?.data.userId)).toEqual(
        single.queues.map((_queue, p) => (p === partition(userId) ? userId : undefined)),
      );
    }
    expect(new Set(users.map(partition)).size).toBe(PARTITIONS);

    // One in a partition other than 0: its status, then cancelled.
    const far = results.find(({ index }) => partition(users[index] ?? '') === 3);
    if (far === undefined) throw new Error('no user in partition 3');
    const status = await single.inject({ method: 'GET', url: `/notifications/${far.id}`, headers: auth });
    expect(status.json()).toMatchObject({ id: far.id, status: 'queued', userId: users[far.index] });
    const cancelled = await single.inject({
      method: 'DELETE',
      url: `/notifications/${far.id}`,
      headers: auth,
    });
    expect(cancelled.json()).toMatchObject({ id: far.id, status: 'cancelled' });
    expect(await single.queues[3]?.getJob(far.id)).toBeUndefined();
  });

  it('gathers envelopes per partition: one user per partition only, their statuses found through its index', async () => {
    const sent = await Promise.all(
      users.map(async (userId) => {
        const response = await enveloping.inject({
          method: 'POST',
          url: '/notify',
          headers: auth,
          payload: { userId, payload: {} },
        });
        expect(response.statusCode).toBe(202);
        return { userId, id: response.json<{ id: string }>().id };
      }),
    );
    for (const [p, queue] of enveloping.queues.entries()) {
      const jobs = (await queue.getJobs([
        'prioritized',
        'waiting',
      ])) as unknown as Job<NotificationEnvelope>[];
      const items = jobs
        .filter((job) => job.name === NOTIFY_ENVELOPE_JOB_NAME)
        .flatMap((job) => job.data.items);
      expect(items.length).toBeGreaterThan(0);
      for (const item of items) expect(partition(item.userId)).toBe(p);
    }
    for (const { id, userId } of sent) {
      const status = await enveloping.inject({ method: 'GET', url: `/notifications/${id}`, headers: auth });
      expect(status.json()).toMatchObject({ id, userId, status: 'queued' });
    }
  });

  it('lists the failed jobs of every partition newest first, counts them all, and retries one where it is', async () => {
    const doomed = [0, 1, 2, 3].map((p) => users.find((userId) => partition(userId) === p) ?? '');
    const ids: string[] = [];
    for (const userId of doomed) {
      const response = await single.inject({
        method: 'POST',
        url: '/notify',
        headers: auth,
        payload: { userId, payload: { doomed: true } },
      });
      ids.push(response.json<{ id: string }>().id);
    }
    const workers = single.queues.map(
      (queue) =>
        new Worker<NotificationJob>(
          queue.name,
          async (job) => {
            if (job.data.payload.doomed === true) throw new Error('push refused');
          },
          {
            prefix: queue.opts.prefix ?? '',
            connection: queueConnection(),
          },
        ),
    );
    try {
      const listed = await waitFor(
        async () => {
          const body = (
            await single.inject({ method: 'GET', url: '/admin/failed?limit=10', headers: admin })
          ).json<FailedJobs>();
          return ids.every((id) => body.jobs.some((job) => job.id === id)) ? body : undefined;
        },
        { timeoutMs: 20_000, what: 'the four to fail' },
      );
      expect(listed.count).toBe(4);
      const times = listed.jobs.map((job) => Date.parse(job.failedAt ?? ''));
      expect(times).toEqual([...times].sort((a, b) => b - a));
      const snapshot = (await single.inject({ method: 'GET', url: '/admin/snapshot', headers: admin })).json<{
        queue: Record<string, number>;
      }>();
      expect(snapshot.queue.failed).toBe(4);
      await Promise.all(workers.map((worker) => worker.pause()));
      const last = ids[3] ?? '';
      const retried = await single.inject({
        method: 'POST',
        url: `/admin/failed/${last}/retry`,
        headers: admin,
      });
      expect(retried.json()).toEqual({ id: last, status: 'retried' });
      expect(await single.queues[3]?.getJobState(last)).toBe('prioritized');
    } finally {
      await Promise.all(workers.map((worker) => worker.close()));
    }
  });
});
