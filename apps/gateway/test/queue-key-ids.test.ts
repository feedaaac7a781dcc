import { randomUUID } from 'node:crypto';
import { envelopeIndexKey, fanoutQueueName, NOTIFY_JOB_NAME } from '@herald/protocol';
import { randomId, waitFor } from '@herald/testing';
import type { FastifyInstance } from 'fastify';
import { beforeAll, describe, expect, it } from 'vitest';
import { auth, everyPartition, testAppForFile, workerOnEveryPartition } from './helpers.js';

// Envelopes on (the default shape: plain sends ride in envelopes, indexed), and the admin API.
const ADMIN_KEY = 'admin-key-0123456789abcdef0123456789abcdef';
const admin = { authorization: `Bearer ${ADMIN_KEY}` };
const app: FastifyInstance = await testAppForFile({
  HERALD_ADMIN_KEY: ADMIN_KEY,
  HERALD_ENVELOPE_WINDOW_MS: '20',
  // These tests are not about a slow Redis: a loaded 2-core machine answering late is no 503 here.
  HERALD_REDIS_TIMEOUT_MS: '4000',
  HERALD_RATE_LIMIT_BURST: '1000',
  HERALD_SENDER_RATE_LIMIT_BURST: '1000',
});

const send = async (payload: Record<string, unknown>) => {
  const response = await app.inject({ method: 'POST', url: '/notify', headers: auth, payload });
  expect(response.statusCode, response.body).toBe(202);
  return response.json<{ id: string }>().id;
};

// The keys a queue of BullMQ and Herald keeps beside its jobs (`<prefix>:<queue>:<name>`), all there
// (see beforeAll): strings, lists, sorted sets, a stream, and hashes that are no job.
const INTERNAL = [
  'stalled-check',
  'id',
  'events',
  'completed',
  'delayed',
  'prioritized',
  'pc',
  'wait',
  'marker',
  'meta',
  'herald-envelopes',
];
let delayedId = '';
const partition0 = () => {
  const queue = app.queues[0];
  if (queue === undefined) throw new Error('no partition 0');
  return queue;
};
const keyOf = (name: string) => `${partition0().opts.prefix}:${partition0().name}:${name}`;
/** A user whose notifications go to partition 0 (on a Redis Cluster run there are several). */
const userOn0 = (prefix: string) => {
  for (;;) {
    const userId = randomId(prefix);
    if (app.partitionOf('default', userId) === 0) return userId;
  }
};

beforeAll(async () => {
  // A completed envelope (and a worker's stalled check), then what stays queued: an envelope, a
  // delayed job with a log line, a prioritised one, a topic send (the fan-out queue's keys).
  const done = await send({ userId: userOn0('done'), payload: {} });
  const worker = workerOnEveryPartition(app, async () => undefined);
  try {
    await waitFor(async () => (await everyPartition(app).getJobCountByTypes('completed')) > 0, {
      what: 'an envelope completed',
    });
  } finally {
    await worker.close();
  }
  expect(done).toBeTruthy();
  await send({ userId: userOn0('queued'), payload: {} });
  delayedId = await send({ userId: userOn0('later'), payload: {}, delayMs: 600_000 });
  await (await everyPartition(app).getJob(delayedId))?.log('a log line');
  await send({ userId: userOn0('prioritised'), payload: {}, priority: 5 });
  await send({ broadcast: true, payload: {} });
  // A job without a priority, in BullMQ's `wait` list: what a gateway of before 2026-12-07 enqueued
  // (every job has one since: DEFAULT_PRIORITY), still there after an upgrade.
  const old = { id: randomUUID(), userId: userOn0('old'), payload: {}, createdAt: new Date().toISOString() };
  await partition0().add(NOTIFY_JOB_NAME, old, { jobId: old.id });
  // The worker's stalled check lives stalledInterval (30 s): set it again as BullMQ does if gone.
  await app.queueConnection.set(keyOf('stalled-check'), String(Date.now()), 'PX', 60_000, 'NX');
});

describe('an id that names one of the queue’s own keys is no notification (404, never a 5xx)', () => {
  it('those keys are all there, of BullMQ’s types, in the notification queue and the fan-out queue', async () => {
    for (const name of [...INTERNAL, `${delayedId}:logs`])
      expect(await app.queueConnection.type(keyOf(name)), name).not.toBe('none');
    expect(await app.queueConnection.type(keyOf('herald-envelopes'))).toBe('hash');
    const fanout = `${partition0().opts.prefix}:${fanoutQueueName(app.config.queue.name)}`;
    for (const name of ['events', 'meta', 'id'])
      expect(await app.queueConnection.type(`${fanout}:${name}`), name).not.toBe('none');
  });

  it.each([...INTERNAL, 'lock-of-a-job', 'logs-of-a-job'])(
    'GET and DELETE /notifications/%s, and the admin retry of it: 404',
    async (name) => {
      const id =
        name === 'lock-of-a-job'
          ? `${delayedId}:lock`
          : name === 'logs-of-a-job'
            ? `${delayedId}:logs`
            : name;
      const path = encodeURIComponent(id);
      for (const [method, url, headers] of [
        ['GET', `/notifications/${path}`, auth],
        ['GET', `/notifications/${path}?userId=alice`, auth],
        ['DELETE', `/notifications/${path}`, auth],
        ['POST', `/admin/failed/${path}/retry`, admin],
      ] as const) {
        const response = await app.inject({ method, url, headers });
        expect(response.statusCode, `${method} ${url}`).toBe(404);
        expect(response.json(), `${method} ${url}`).toMatchObject({ code: 'HERALD_ERR_NOT_FOUND' });
      }
    },
  );

  it('a key of a name not known yet (a later BullMQ’s): a list or a hash that is no job is no notification either', async () => {
    await app.queueConnection.rpush(keyOf('later-list'), 'x');
    await app.queueConnection.hset(keyOf('later-hash'), 'field', 'value');
    try {
      for (const name of ['later-list', 'later-hash'])
        for (const [method, url, headers] of [
          ['GET', `/notifications/${name}`, auth],
          ['DELETE', `/notifications/${name}`, auth],
          ['POST', `/admin/failed/${name}/retry`, admin],
        ] as const) {
          const response = await app.inject({ method, url, headers });
          expect(response.statusCode, `${method} ${url}`).toBe(404);
        }
      expect(await app.queueConnection.hget(keyOf('later-hash'), 'field')).toBe('value');
    } finally {
      await app.queueConnection.del(keyOf('later-list'), keyOf('later-hash'));
    }
  });

  it('an envelope’s id is no notification either: 404 to GET and DELETE, and the envelope stays', async () => {
    const id = await send({ userId: userOn0('carried'), payload: {} });
    const index = envelopeIndexKey({ prefix: partition0().opts.prefix ?? '', name: partition0().name });
    const envelopeId = (await app.queueConnection.hget(index, id)) ?? '';
    expect(envelopeId).toMatch(/^envelope-/);
    for (const method of ['GET', 'DELETE'] as const) {
      const response = await app.inject({ method, url: `/notifications/${envelopeId}`, headers: auth });
      expect(response.statusCode, method).toBe(404);
    }
    expect(await partition0().getJobState(envelopeId)).toBe('prioritized');
    expect(await app.queueConnection.hget(index, id)).toBe(envelopeId);
  });

  it('the queue still works after: its keys are all there, a send is queued and has its status', async () => {
    for (const name of INTERNAL) expect(await app.queueConnection.type(keyOf(name)), name).not.toBe('none');
    const id = await send({ userId: userOn0('after'), payload: {} });
    const status = await app.inject({ method: 'GET', url: `/notifications/${id}`, headers: auth });
    expect(status.statusCode).toBe(200);
    expect(status.json()).toMatchObject({ id, status: 'queued' });
    const delayed = await app.inject({ method: 'GET', url: `/notifications/${delayedId}`, headers: auth });
    expect(delayed.json()).toMatchObject({ id: delayedId, status: 'queued' });
  });
});
