import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { auth, buildTestApp, disposeTestApp, everyPartition } from './helpers.js';

let app: FastifyInstance | undefined;
afterEach(async () => {
  if (app) await disposeTestApp(app);
  app = undefined;
});

const batch = (target: FastifyInstance, notifications: unknown[], headers: Record<string, string> = auth) =>
  target.inject({ method: 'POST', url: '/notify/batch', headers, payload: { notifications } });

describe('POST /notify/batch', () => {
  it('accepts up to 100 notifications and reports an id for each, in order', async () => {
    app = await buildTestApp({ HERALD_RATE_LIMIT_BURST: '1000', HERALD_SENDER_RATE_LIMIT_BURST: '1000' });
    const items = Array.from({ length: 100 }, (_, i) => ({ userId: `user-${i % 7}`, payload: { i } }));
    const response = await batch(app, items);
    expect(response.statusCode).toBe(202);
    const body = response.json<{
      accepted: number;
      results: { index: number; id: string; status: string }[];
    }>();
    expect(body.accepted).toBe(100);
    expect(body.results.map((result) => result.index)).toEqual(items.map((_, i) => i));
    const jobs = await Promise.all(
      body.results.map((result) => everyPartition(app as FastifyInstance).getJob(result.id)),
    );
    expect(jobs.map((job) => job?.data.payload.i)).toEqual(items.map((_, i) => i));
  });

  it('refuses 101 notifications and an empty batch whole', async () => {
    app = await buildTestApp();
    const tooMany = await batch(
      app,
      Array.from({ length: 101 }, () => ({ userId: 'u', payload: {} })),
    );
    expect(tooMany.statusCode).toBe(400);
    expect(tooMany.json<{ details: { field: string }[] }>().details[0]?.field).toBe('body.notifications');
    expect((await batch(app, [])).statusCode).toBe(400);
    expect(await everyPartition(app).count()).toBe(0);
  });

  it('rejects a bad item alone, naming its field, and sends the others', async () => {
    app = await buildTestApp();
    const response = await batch(app, [
      { userId: 'ok-1', payload: { n: 1 } },
      { userId: 'missing-payload' },
      { userId: 'ok-2', payload: { n: 2 } },
      { userId: 'big', payload: { x: 'y'.repeat(17_000) } },
      { userId: 'bad id', payload: {} },
    ]);
    expect(response.statusCode).toBe(202);
    const body = response.json<{
      accepted: number;
      rejected: number;
      results: { index: number; status: string; id?: string; code?: string; details?: { field: string }[] }[];
    }>();
    expect(body).toMatchObject({ accepted: 2, rejected: 3 });
    expect(body.results.map((result) => [result.index, result.status])).toEqual([
      [0, 'queued'],
      [1, 'rejected'],
      [2, 'queued'],
      [3, 'rejected'],
      [4, 'rejected'],
    ]);
    expect(body.results[1]).toMatchObject({
      code: 'HERALD_ERR_VALIDATION',
      details: [{ field: 'body.notifications.1.payload' }],
    });
    expect(body.results[3]).toMatchObject({
      code: 'HERALD_ERR_PAYLOAD_TOO_LARGE',
      details: [{ field: 'body.notifications.3.payload' }],
    });
    expect(body.results[4]).toMatchObject({ details: [{ field: 'body.notifications.4.userId' }] });
    const jobs = await Promise.all(
      [0, 2].map((i) => everyPartition(app as FastifyInstance).getJob(body.results[i]?.id as string)),
    );
    expect(jobs.map((job) => job?.data.userId)).toEqual(['ok-1', 'ok-2']);
    expect(await everyPartition(app).count()).toBe(2);
  });

  it('rejects an item with priority 2097152 alone (naming its priority) and sends the others, 2097151 included', async () => {
    app = await buildTestApp();
    const response = await batch(app, [
      { userId: 'lowest', payload: {}, priority: 2_097_151 },
      { userId: 'beyond', payload: {}, priority: 2_097_152 },
      { userId: 'plain', payload: {} },
    ]);
    expect(response.statusCode).toBe(202);
    const body = response.json<{
      accepted: number;
      rejected: number;
      results: { index: number; status: string; id?: string; code?: string; details?: { field: string }[] }[];
    }>();
    expect(body).toMatchObject({ accepted: 2, rejected: 1 });
    expect(body.results[1]).toMatchObject({
      status: 'rejected',
      code: 'HERALD_ERR_VALIDATION',
      details: [{ field: 'body.notifications.1.priority' }],
    });
    const jobs = await Promise.all(
      [0, 2].map((i) => everyPartition(app as FastifyInstance).getJob(body.results[i]?.id as string)),
    );
    expect(jobs.map((job) => job?.data.userId)).toEqual(['lowest', 'plain']);
    expect(jobs[0]?.opts.priority).toBe(2_097_151);
    expect(await everyPartition(app).count()).toBe(2);
  });

  it('answers 400 naming every problem when no item is valid', async () => {
    app = await buildTestApp();
    const response = await batch(app, [{ userId: 'u' }, { payload: {} }]);
    expect(response.statusCode).toBe(400);
    expect(response.json<{ details: { field: string }[] }>().details.map((detail) => detail.field)).toEqual([
      'body.notifications.0.payload',
      'body.notifications.1.userId',
    ]);
    expect(await everyPartition(app).count()).toBe(0);
  });

  it('costs one token per recipient, and a batch the limits cannot take is refused whole', async () => {
    app = await buildTestApp({ HERALD_RATE_LIMIT_BURST: '3', HERALD_RATE_LIMIT_PER_SECOND: '0.001' });
    // carol gets 2 of her 3 tokens' worth; dave 1.
    const first = await batch(app, [
      { userId: 'carol', payload: {} },
      { userId: 'carol', payload: {} },
      { userId: 'dave', payload: {} },
    ]);
    expect(first.statusCode).toBe(202);
    // 2 more for carol exceeds her bucket: nothing of this batch may be taken or enqueued, not even dave's.
    const refused = await batch(app, [
      { userId: 'dave', payload: {} },
      { userId: 'carol', payload: {} },
      { userId: 'carol', payload: {} },
    ]);
    expect(refused.statusCode).toBe(429);
    expect(refused.json()).toMatchObject({ code: 'HERALD_ERR_RATE_LIMITED', policy: 'recipient' });
    expect(await everyPartition(app).count()).toBe(3);
    // dave's token was not consumed by the refused batch: he still has 2.
    const dave = await batch(app, [
      { userId: 'dave', payload: {} },
      { userId: 'dave', payload: {} },
    ]);
    expect(dave.statusCode).toBe(202);
    expect((await batch(app, [{ userId: 'carol', payload: {} }])).statusCode).toBe(202);
    expect((await batch(app, [{ userId: 'carol', payload: {} }])).statusCode).toBe(429);
  });
});
