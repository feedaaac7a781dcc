import { createECDH } from 'node:crypto';
import { ErrorCode, type NotificationJob } from '@herald/protocol';
import { EscalationRecords } from '@herald/push';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auth, buildTestApp, disposeTestApp, everyPartition } from './helpers.js';

const vapid = createECDH('prime256v1');
vapid.generateKeys();

let app: FastifyInstance;
let off: FastifyInstance;
beforeAll(async () => {
  [app, off] = await Promise.all([
    buildTestApp({
      HERALD_VAPID_PUBLIC_KEY: vapid.getPublicKey('base64url'),
      HERALD_RATE_LIMIT_BURST: '100',
    }),
    buildTestApp({ HERALD_RATE_LIMIT_BURST: '100' }),
  ]);
});
afterAll(async () => {
  await Promise.all([disposeTestApp(app), disposeTestApp(off)]);
});

const notify = (target: FastifyInstance, payload: unknown, url = '/notify') =>
  target.inject({ method: 'POST', url, headers: auth, payload: payload as Record<string, unknown> });

describe('POST /notify escalateAfterMs', () => {
  it('is carried by the job of a single-user send and of a batch item', async () => {
    const single = await notify(app, { userId: 'esc-a', payload: {}, escalateAfterMs: 30_000 });
    expect(single.statusCode).toBe(202);
    const job = await everyPartition(app).getJob(single.json<{ id: string }>().id);
    expect((job?.data as NotificationJob | undefined)?.escalateAfterMs).toBe(30_000);
    const batch = await notify(
      app,
      { notifications: [{ userId: 'esc-b', payload: {}, escalateAfterMs: 1000 }] },
      '/notify/batch',
    );
    expect(batch.json()).toMatchObject({ accepted: 1, rejected: 0 });
  });

  it.each([0, 999, 86_400_001, 1.5, '1000', null])(
    'refuses escalateAfterMs %j: 400 naming it',
    async (value) => {
      const response = await notify(app, { userId: 'esc-a', payload: {}, escalateAfterMs: value });
      expect(response.statusCode).toBe(400);
      expect(response.json()).toMatchObject({ code: ErrorCode.VALIDATION });
      expect(JSON.stringify(response.json().details)).toContain('body.escalateAfterMs');
    },
  );

  it('refuses it on a topic send or broadcast', async () => {
    for (const target of [{ topic: 'orders' }, { broadcast: true }]) {
      const response = await notify(app, { ...target, payload: {}, escalateAfterMs: 5000 });
      expect(response.statusCode).toBe(400);
      expect(response.json().details).toEqual([
        {
          field: 'body.escalateAfterMs',
          message: 'goes with userId only: a topic send or broadcast does not escalate to Web Push',
        },
      ]);
    }
  });

  it('without VAPID keys: 422 HERALD_ERR_PUSH_NOT_CONFIGURED, in a batch for that item alone', async () => {
    const response = await notify(off, { userId: 'esc-a', payload: {}, escalateAfterMs: 5000 });
    expect(response.statusCode).toBe(422);
    expect(response.json()).toMatchObject({
      code: ErrorCode.PUSH_NOT_CONFIGURED,
      details: [{ field: 'body.escalateAfterMs' }],
    });
    // Where the key goes, as the README says: the worker refuses a partial set (before: "gateway, realtime").
    expect(response.json().error).toContain('HERALD_VAPID_PUBLIC_KEY (gateway, worker, realtime)');
    const batch = await notify(
      off,
      {
        notifications: [
          { userId: 'esc-a', payload: {} },
          { userId: 'esc-a', payload: {}, escalateAfterMs: 5000 },
        ],
      },
      '/notify/batch',
    );
    expect(batch.statusCode).toBe(202);
    expect(batch.json().results[1]).toMatchObject({
      status: 'rejected',
      code: ErrorCode.PUSH_NOT_CONFIGURED,
      details: [{ field: 'body.notifications.1.escalateAfterMs' }],
    });
    expect((await notify(off, { userId: 'esc-a', payload: {} })).statusCode).toBe(202);
  });

  it('GET /notifications/:id shows the escalation the worker recorded (as /openapi.json documents it)', async () => {
    const sent = await notify(app, { userId: 'esc-c', payload: { n: 1 }, escalateAfterMs: 1000 });
    const id = sent.json<{ id: string }>().id;
    // What the worker does: store it, then record the escalation in its marker.
    const inbox = app.inbox.tenant('default');
    await inbox.append({ id, userId: 'esc-c', payload: { n: 1 }, createdAt: new Date().toISOString() });
    const records = new EscalationRecords(app.redis);
    const marker = inbox.keys('esc-c').marker(id);
    await records.scheduled(marker, Date.now() + 1000);
    const scheduled = await app.inject({ method: 'GET', url: `/notifications/${id}`, headers: auth });
    expect(scheduled.json().escalation).toMatchObject({ state: 'scheduled', dueAt: expect.any(String) });
    await records.settle(marker, { state: 'pushed', at: new Date().toISOString(), sent: 2, failed: 1 });
    const pushed = await app.inject({ method: 'GET', url: `/notifications/${id}`, headers: auth });
    expect(pushed.json()).toMatchObject({
      status: 'queued',
      escalation: { state: 'pushed', sent: 2, failed: 1, dueAt: scheduled.json().escalation.dueAt },
    });
  });
});
