import { envelopeIndexKey, NOTIFY_ENVELOPE_JOB_NAME, type NotificationJob } from '@herald/protocol';
import { randomId, waitFor } from '@herald/testing';
import type { FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { auth, buildTestApp, disposeTestApp, everyPartition, workerOnEveryPartition } from './helpers.js';

// Envelopes on (plain sends ride in them, as in production); no worker unless a test starts one, so
// what is sent stays queued. A failed attempt waits an hour before the next.
const ADMIN_KEY = 'admin-key-0123456789abcdef0123456789abcdef';
const admin = { authorization: `Bearer ${ADMIN_KEY}` };
let app: FastifyInstance;
beforeEach(async () => {
  app = await buildTestApp({
    HERALD_ADMIN_KEY: ADMIN_KEY,
    HERALD_ENVELOPE_WINDOW_MS: '20',
    // These tests are not about a slow Redis: a loaded 2-core machine answering late is no 503 here.
    HERALD_REDIS_TIMEOUT_MS: '4000',
    HERALD_JOB_BACKOFF_MS: '3600000',
    HERALD_RATE_LIMIT_BURST: '1000',
  });
});
afterEach(async () => {
  await Promise.all(app.queues.map((queue) => app.queueConnection.del(indexOf(queue))));
  await disposeTestApp(app);
});

const indexOf = (queue: FastifyInstance['queue']) =>
  envelopeIndexKey({ prefix: queue.opts.prefix ?? '', name: queue.name });
const send = async (payload: Record<string, unknown>, headers: Record<string, string> = auth) => {
  const response = await app.inject({ method: 'POST', url: '/notify', headers, payload });
  expect(response.statusCode, response.body).toBe(202);
  return response.json<{ id: string }>().id;
};
/** The envelope that carries notification `id` (its partition's index says which). */
async function envelopeOf(id: string): Promise<string> {
  for (const queue of app.queues) {
    const envelopeId = await app.queueConnection.hget(indexOf(queue), id);
    if (envelopeId !== null) return envelopeId;
  }
  throw new Error(`${id} is in no envelope`);
}
const retry = (id: string) =>
  app.inject({ method: 'POST', url: `/admin/failed/${encodeURIComponent(id)}/retry`, headers: admin });

describe('POST /admin/failed/:id/retry of a notification carried in an envelope', () => {
  it('waiting in its envelope: 409 HERALD_ERR_NOT_FAILED with the state (any tenant’s: the admin sees all); the envelope stays as it was', async () => {
    const other = await app.apiKeys.create({ name: 'other', tenantId: 'other-tenant' });
    for (const headers of [auth, { authorization: `Bearer ${other.key}` }]) {
      const id = await send({ userId: randomId('waiting'), payload: {} }, headers);
      const envelopeId = await envelopeOf(id);
      const response = await retry(id);
      expect(response.statusCode).toBe(409);
      expect(response.json()).toMatchObject({ code: 'HERALD_ERR_NOT_FAILED', state: 'waiting' });
      expect(response.json<{ error: string }>().error).toContain(id);
      expect(await everyPartition(app).getJobState(envelopeId)).toBe('prioritized');
    }
  });

  it('its envelope waiting for the next attempt: 409 with the state `delayed`', async () => {
    const id = await send({ userId: randomId('retrying'), payload: {} });
    const envelopeId = await envelopeOf(id);
    const failing = workerOnEveryPartition(app, async () => Promise.reject(new Error('push refused')));
    try {
      await waitFor(async () => (await everyPartition(app).getJobState(envelopeId)) === 'delayed', {
        what: 'the envelope to wait for its next attempt',
      });
    } finally {
      await failing.close();
    }
    const response = await retry(id);
    expect(response.statusCode).toBe(409);
    expect(response.json()).toMatchObject({ code: 'HERALD_ERR_NOT_FAILED', state: 'delayed' });
  });

  it('its envelope failed for good: the envelope is retried (200), as `herald failed retry <envelope id>` does', async () => {
    // An envelope of one attempt, indexed as the gateway indexes its envelopes.
    const queue = app.queue;
    const envelopeId = `envelope-${randomId('failed')}`;
    const item: NotificationJob = {
      id: crypto.randomUUID(),
      userId: randomId('doomed'),
      payload: {},
      createdAt: new Date().toISOString(),
      tenantId: 'default',
    };
    await app.queueConnection.hset(indexOf(queue), item.id, envelopeId);
    await queue.add(NOTIFY_ENVELOPE_JOB_NAME as 'notify', { items: [item] } as unknown as NotificationJob, {
      jobId: envelopeId,
      attempts: 1,
      removeOnFail: false,
    });
    const failing = workerOnEveryPartition(app, async () => Promise.reject(new Error('push refused')));
    try {
      await waitFor(async () => (await queue.getJobState(envelopeId)) === 'failed', {
        what: 'the envelope to fail',
      });
    } finally {
      await failing.close();
    }
    const response = await retry(item.id);
    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual({ id: item.id, status: 'retried' });
    expect(await queue.getJobState(envelopeId)).toBe('waiting');
  });

  it('stored already (its envelope done, out of the index) or never sent: 404 saying it is not in the queue and where its status is', async () => {
    const id = await send({ userId: randomId('stored'), payload: {} });
    const envelopeId = await envelopeOf(id);
    // As the worker does: the envelope's notifications stored, then dropped from the index.
    const worker = workerOnEveryPartition(app, async (job) => {
      const items = (job.data as unknown as { items: NotificationJob[] }).items;
      await Promise.all(
        app.queues.map((queue) => app.queueConnection.hdel(indexOf(queue), ...items.map((i) => i.id))),
      );
    });
    try {
      await waitFor(async () => (await everyPartition(app).getJobState(envelopeId)) === 'completed', {
        what: 'the envelope done',
      });
    } finally {
      await worker.close();
    }
    for (const missing of [id, crypto.randomUUID()]) {
      const response = await retry(missing);
      expect(response.statusCode).toBe(404);
      const body = response.json<{ code: string; error: string }>();
      expect(body.code).toBe('HERALD_ERR_NOT_FOUND');
      expect(body.error).toContain(`${missing} is not in the queue`);
      expect(body.error).toContain('GET /notifications/');
    }
  });
});
