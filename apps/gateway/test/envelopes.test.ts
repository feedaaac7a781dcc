import { Inbox } from '@herald/inbox';
import {
  envelopeIndexKey,
  NOTIFY_ENVELOPE_JOB_NAME,
  NOTIFY_JOB_NAME,
  type NotificationEnvelope,
  type NotificationJob,
  notificationJobOptions,
} from '@herald/protocol';
import { testRedis, waitFor } from '@herald/testing';
import { type Job, Queue } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../src/config.js';
import { ArrivalRate, ENVELOPE_TARGET_ITEMS, ENVELOPE_WINDOW_MS } from '../src/envelopes.js';
import { statusOf } from '../src/status.js';
import { auth, everyPartition, testAppForFile, testEnv, workerOnEveryPartition } from './helpers.js';

// The default window; no worker runs here, so envelopes stay in the queue for the tests to read.
const ADMIN_KEY = 'admin-key-0123456789abcdef0123456789abcdef';
const app: FastifyInstance = await testAppForFile({
  HERALD_ADMIN_KEY: ADMIN_KEY,
  HERALD_ENVELOPE_WINDOW_MS: '50',
  HERALD_RATE_LIMIT_BURST: '1000',
  HERALD_SENDER_RATE_LIMIT_BURST: '1000',
});
// Each partition's index of its envelopes (notification id -> envelope id), beside its queue.
const indexes = app.queues.map((queue) =>
  envelopeIndexKey({ prefix: queue.opts.prefix ?? '', name: queue.name }),
);
afterAll(() => Promise.all(indexes.map((index) => app.queueConnection.del(index))));

const send = (payload: object, headers = auth) =>
  app.inject({ method: 'POST', url: '/notify', headers, payload });

async function envelopes(): Promise<Job<NotificationEnvelope>[]> {
  const jobs = (await everyPartition(app).getJobs([
    'prioritized',
    'waiting',
  ])) as unknown as Job<NotificationEnvelope>[];
  return jobs.filter((job) => job.name === NOTIFY_ENVELOPE_JOB_NAME);
}

describe('envelopes (HERALD_ENVELOPE_WINDOW_MS)', () => {
  it('concurrent sends ride in a few jobs (those arriving while one is added, in the next), in send order, each with its own id; delayed and prioritised ones get their own', async () => {
    const before = new Set((await envelopes()).map((job) => job.id));
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, n) => send({ userId: `u${n % 3}`, payload: { n } })),
    );
    expect(answers.map((answer) => answer.statusCode)).toEqual(Array(20).fill(202));
    const ids = answers.map((answer) => answer.json<{ id: string }>().id);
    // 202 means in Redis: the envelopes are there once the answers are. Group commit: the first goes at
    // once, what arrives while it is added goes in the next, so far fewer jobs than notifications.
    const fresh = (await envelopes())
      .filter((job) => !before.has(job.id))
      .sort((a, b) => (a.data.items[0]?.seq ?? 0) - (b.data.items[0]?.seq ?? 0));
    // An envelope per partition a window reaches (3 users: on a Redis Cluster run, up to 3 partitions).
    expect(fresh.length).toBeGreaterThanOrEqual(1);
    expect(fresh.length).toBeLessThanOrEqual(5 * app.queues.length);
    const items = fresh.flatMap((job) => job.data.items);
    expect(new Set(items.map((item) => item.id))).toEqual(new Set(ids));
    expect(items).toHaveLength(20);
    // In send order: within each envelope, and each user's from one envelope to the next.
    for (const job of fresh) {
      const seqs = job.data.items.map((item) => item.seq ?? -1);
      expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    }
    for (const user of ['u0', 'u1', 'u2']) {
      const seqs = items.filter((item) => item.userId === user).map((item) => item.seq ?? -1);
      expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    }
    for (const item of items) expect(item.payload).toEqual({ n: ids.indexOf(item.id) });
    expect(fresh[0]?.opts).toMatchObject({
      attempts: 8,
      removeOnComplete: { age: 3600, count: 10_000 },
      removeOnFail: false,
    });
    for (const job of fresh) {
      const index = indexes[app.partitionOf('default', job.data.items[0]?.userId ?? '')] ?? '';
      const indexed = await app.queueConnection.hmget(index, ...job.data.items.map((item) => item.id));
      expect(new Set(indexed)).toEqual(new Set([job.id]));
    }

    const delayed = await send({ userId: 'u1', payload: {}, delayMs: 60_000 });
    const prioritised = await send({ userId: 'u1', payload: {}, priority: 3 });
    for (const answer of [delayed, prioritised]) {
      const job = (await everyPartition(app).getJob(answer.json<{ id: string }>().id)) as
        | Job<NotificationJob>
        | undefined;
      expect(job?.name).toBe('notify');
    }
  });

  it('a batch rides whole in one envelope (one per queue partition it reaches)', async () => {
    const response = await app.inject({
      method: 'POST',
      url: '/notify/batch',
      headers: auth,
      payload: { notifications: Array.from({ length: 30 }, (_, n) => ({ userId: `b${n}`, payload: { n } })) },
    });
    expect(response.statusCode).toBe(202);
    const ids = response.json<{ results: { id: string }[] }>().results.map((result) => result.id);
    const carrying = (await envelopes()).filter((job) =>
      job.data.items.some((item) => ids.includes(item.id)),
    );
    const partitions = new Set(ids.map((_, n) => app.partitionOf('default', `b${n}`)));
    expect(carrying).toHaveLength(partitions.size);
    // Each envelope: the batch's notifications of its partition, in the batch's order.
    const carried = carrying.flatMap((job) => job.data.items.map((item) => item.id));
    expect([...carried].sort()).toEqual([...ids].sort());
    for (const job of carrying) {
      const own = job.data.items.map((item) => item.id);
      expect(own).toEqual(ids.filter((id) => own.includes(id)));
    }
  });

  it('an enveloped notification has its status (queued) and can be cancelled; to another tenant it does not exist', async () => {
    const sent = await send({ userId: 'carol', payload: { text: 'x' } });
    const { id } = sent.json<{ id: string }>();
    const status = await app.inject({ method: 'GET', url: `/notifications/${id}`, headers: auth });
    expect(status.statusCode).toBe(200);
    expect(status.json()).toMatchObject({ id, userId: 'carol', status: 'queued', attempts: 0 });
    expect(status.json<{ createdAt: string }>().createdAt).toBe(
      (await envelopes()).flatMap((job) => job.data.items).find((item) => item.id === id)?.createdAt,
    );
    const otherKey = await app.apiKeys.create({ name: 'other', tenantId: 'other-tenant' });
    const other = { authorization: `Bearer ${otherKey.key}` };
    for (const method of ['GET', 'DELETE'] as const) {
      const foreign = await app.inject({ method, url: `/notifications/${id}`, headers: other });
      expect(foreign.statusCode, method).toBe(404);
    }
    const cancelled = await app.inject({ method: 'DELETE', url: `/notifications/${id}`, headers: auth });
    expect(cancelled.statusCode).toBe(200);
    expect(cancelled.json()).toMatchObject({ id, status: 'cancelled' });
    const after = await app.inject({ method: 'GET', url: `/notifications/${id}`, headers: auth });
    expect(after.json()).toMatchObject({ status: 'cancelled' });
  });

  it('an envelope failed for good is listed by the admin API (its first user and how many it carries) and retried whole', async () => {
    const envelopeId = `envelope-failed-${Date.now()}`;
    const items = ['dora', 'eve'].map((userId, n) => ({
      id: `${envelopeId}-${n}`,
      userId,
      payload: {},
      createdAt: new Date().toISOString(),
      tenantId: 'default',
    }));
    await app.queue.add(NOTIFY_ENVELOPE_JOB_NAME as 'notify', { items } as unknown as NotificationJob, {
      jobId: envelopeId,
      attempts: 1,
      removeOnFail: false,
    });
    const failing = workerOnEveryPartition(app, async () => Promise.reject(new Error('boom')));
    try {
      const admin = { authorization: `Bearer ${ADMIN_KEY}` };
      let listed: { id: string; tenantId: string; userId: string; reason: string }[] = [];
      await waitFor(
        async () => {
          const response = await app.inject({ method: 'GET', url: '/admin/failed', headers: admin });
          expect(response.statusCode).toBe(200);
          listed = response.json<{ jobs: typeof listed }>().jobs;
          return listed.some((job) => job.id === envelopeId);
        },
        { what: 'the failed envelope listed' },
      );
      expect(listed.find((job) => job.id === envelopeId)).toMatchObject({
        tenantId: 'default',
        userId: 'dora (and 1 more in this envelope)',
        reason: 'boom',
      });
      await failing.close();
      const retried = await app.inject({
        method: 'POST',
        url: `/admin/failed/${envelopeId}/retry`,
        headers: admin,
      });
      expect(retried.statusCode).toBe(200);
      expect(await everyPartition(app).getJobState(envelopeId)).toBe('waiting');
    } finally {
      await failing.close();
    }
  });

  it('a window longer than a quarter of the Redis timeout is refused at start, naming both', () => {
    expect(() =>
      loadConfig(testEnv({ HERALD_ENVELOPE_WINDOW_MS: '300', HERALD_REDIS_TIMEOUT_MS: '800' })),
    ).toThrow(
      /HERALD_ENVELOPE_WINDOW_MS \(300\) must be at most a quarter of HERALD_REDIS_TIMEOUT_MS \(800\)/,
    );
  });

  it('unset, the window is 20 ms, or a quarter of a shorter Redis timeout (never a refusal)', () => {
    // (The run's Cluster sets a limiter timeout, which a 60 ms Redis timeout would refuse.)
    const { HERALD_ENVELOPE_WINDOW_MS: _zero, HERALD_RATE_LIMIT_TIMEOUT_MS: _limiter, ...unset } = testEnv();
    expect(loadConfig(unset).envelopeWindowMs).toBe(ENVELOPE_WINDOW_MS);
    expect(ENVELOPE_WINDOW_MS).toBe(20);
    expect(loadConfig({ ...unset, HERALD_REDIS_TIMEOUT_MS: '60' }).envelopeWindowMs).toBe(15);
    expect(loadConfig({ ...unset, HERALD_ENVELOPE_WINDOW_MS: '10' }).envelopeWindowMs).toBe(10);
  });

  it('a target larger than the envelope is refused at start, naming both; unset, it is 20 or the envelope', () => {
    expect(() =>
      loadConfig(testEnv({ HERALD_ENVELOPE_TARGET_ITEMS: '300', HERALD_ENVELOPE_MAX_ITEMS: '200' })),
    ).toThrow(/HERALD_ENVELOPE_TARGET_ITEMS \(300\) must be at most HERALD_ENVELOPE_MAX_ITEMS \(200\)/);
    expect(() => loadConfig(testEnv({ HERALD_ENVELOPE_TARGET_ITEMS: '0' }))).toThrow(
      /HERALD_ENVELOPE_TARGET_ITEMS/,
    );
    expect(loadConfig(testEnv({})).envelopeTargetItems).toBe(ENVELOPE_TARGET_ITEMS);
    expect(ENVELOPE_TARGET_ITEMS).toBe(20);
    expect(loadConfig(testEnv({ HERALD_ENVELOPE_MAX_ITEMS: '10' })).envelopeTargetItems).toBe(10);
    expect(loadConfig(testEnv({ HERALD_ENVELOPE_TARGET_ITEMS: '30' })).envelopeTargetItems).toBe(30);
  });
});

describe('the linger (ArrivalRate)', () => {
  /** The linger after 500 notifications arriving one every `gapMs` (a clock moved by hand). */
  function lingerAfterSteady(rate: ArrivalRate, gapMs: number, share = 1): number {
    let now = 1000;
    const clock = vi.spyOn(performance, 'now').mockImplementation(() => now);
    try {
      for (let i = 0; i < 500; i++) {
        rate.arrived(1);
        now += gapMs;
      }
      return rate.lingerMs(share);
    } finally {
      clock.mockRestore();
    }
  }

  it('is what the target takes at the recent rate, within a tenth of the window and the window', () => {
    // 1,000/s: the default target of 20 takes 20 ms; a target of 30 takes 30 ms.
    expect(lingerAfterSteady(new ArrivalRate(100), 1)).toBeCloseTo(20, 5);
    expect(lingerAfterSteady(new ArrivalRate(100, 30), 1)).toBeCloseTo(30, 5);
    // Capped by the window, and at least a tenth of it (10,000/s with a 100 ms window: 10 ms, not 1).
    expect(lingerAfterSteady(new ArrivalRate(20, 30), 1)).toBe(20);
    expect(lingerAfterSteady(new ArrivalRate(100, 10), 0.1)).toBe(10);
    // A partition's share of the notifications: its envelope waits for its own target.
    expect(lingerAfterSteady(new ArrivalRate(100, 10), 1, 1 / 4)).toBeCloseTo(40, 5);
  });

  it('a status read racing the worker finds the notification stored, never 404 (the queue read, then the inbox)', async () => {
    // The worker stores a notification, then drops its envelope index entry. A read of the inbox before
    // the store and of the envelope index after the drop found neither: 404 for an accepted notification.
    // Here every read and write is on one connection, in this order: the status's first reads, the
    // append, the HDEL, then the status's envelope index read (on a Cluster, store then drop, as it comes).
    const connection = testRedis({ maxRetriesPerRequest: null });
    const queues = app.queues.map(
      (queue) => new Queue<NotificationJob>(queue.name, { prefix: queue.opts.prefix ?? '', connection }),
    );
    const inbox = new Inbox(connection, app.config.inbox);
    try {
      const sent = await send({ userId: 'racer', payload: {} });
      expect(sent.statusCode).toBe(202);
      const id = sent.json<{ id: string }>().id;
      const index = indexes[app.partitionOf('default', 'racer')] ?? '';
      const queue = queues[app.partitionOf('default', 'racer')] as Queue;
      const envelope = (await queue.getJob((await connection.hget(index, id)) ?? '')) as unknown as
        | Job<NotificationEnvelope>
        | undefined;
      const item = envelope?.data.items.find((candidate) => candidate.id === id);
      if (item === undefined) throw new Error(`${id} is in no envelope`);

      const reading = statusOf({ queues, connection }, inbox, 'default', id);
      const stored = inbox.tenant('default').append({ ...item, payload: item.payload ?? {} });
      const drop = () => connection.hdel(index, id);
      await Promise.all([
        stored,
        connection.isCluster ? stored.then(drop) : new Promise((resolve) => setImmediate(resolve)).then(drop),
      ]);
      expect(await reading).toMatchObject({ id, userId: 'racer', status: 'queued' });
      expect(await connection.hexists(index, id)).toBe(0);
    } finally {
      await Promise.all(queues.map((queue) => queue.close()));
      connection.disconnect();
    }
  });

  it('a status read racing the worker as it re-enqueues a failed item finds its own job, never 404', async () => {
    // An envelope item that fails is added as a job of its own, then dropped from the envelope index. A
    // status read whose own-job lookup ran before that add and whose index read ran after the drop found
    // neither (nor the inbox: a failed item is not stored). The index read here does the worker's two
    // steps first, so the reads and writes come in exactly that order.
    const queue = app.queues[app.partitionOf('default', 'retried')] as Queue<NotificationJob>;
    const index = indexes[app.partitionOf('default', 'retried')] ?? '';
    const sent = await send({ userId: 'retried', payload: {} });
    expect(sent.statusCode).toBe(202);
    const id = sent.json<{ id: string }>().id;
    const envelope = (await queue.getJob((await app.queueConnection.hget(index, id)) ?? '')) as unknown as
      | Job<NotificationEnvelope>
      | undefined;
    const item = envelope?.data.items.find((candidate) => candidate.id === id);
    if (item === undefined) throw new Error(`${id} is in no envelope`);
    let reenqueued = false;
    const connection = {
      hget: async (key: string, field: string) => {
        if (!reenqueued) {
          reenqueued = true;
          await queue.addBulk([{ name: NOTIFY_JOB_NAME, data: item, opts: notificationJobOptions(item) }]);
          await app.queueConnection.hdel(index, id);
        }
        return app.queueConnection.hget(key, field);
      },
    } as unknown as typeof app.queueConnection;
    try {
      const status = await statusOf({ queues: app.queues, connection }, app.inbox, 'default', id);
      expect(reenqueued).toBe(true);
      expect(status).toMatchObject({ id, userId: 'retried', status: 'queued' });
    } finally {
      await (await queue.getJob(id))?.remove();
    }
  });
});
