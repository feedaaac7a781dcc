import type { WebhookJob } from '@herald/protocol';
import { describe, expect, it } from 'vitest';
import { auth, buildTestApp, disposeTestApp, testEnv } from './helpers.js';

/** A message as the worker holds it for a parked endpoint. */
const heldMessage = (n: number): WebhookJob => ({
  id: `msg_held${n}`,
  tenantId: 'default',
  payload: {
    type: 'notification.read',
    timestamp: '2026-12-06T00:00:00.000Z',
    data: { notificationId: `n-${n}`, userId: 'alice', at: '2026-12-06T00:00:00.000Z' },
  },
});

describe('POST /webhook/resume when the queue fails half way', () => {
  it('keeps the held messages: the 503 is retried and the retry queues them all', async () => {
    const env = testEnv();
    const first = await buildTestApp(env);
    let second: Awaited<ReturnType<typeof buildTestApp>> | undefined;
    try {
      const created = await first.inject({
        method: 'PUT',
        url: '/webhook',
        headers: auth,
        payload: { url: 'https://example.com/hook' },
      });
      expect(created.statusCode).toBe(201);
      // Parked by a failure, three messages held, as the worker does it.
      const { store } = first.webhooks;
      expect(await store.failed('default', 'HTTP 500', 1)).toBe(true);
      for (const n of [1, 2, 3]) expect(await store.hold(heldMessage(n))).toBe('held');

      // The webhook's own Redis answers; the queue's connection is gone when the messages are queued again.
      first.queueConnection.disconnect();
      const failed = await first.inject({ method: 'POST', url: '/webhook/resume', headers: auth });
      expect(failed.statusCode).toBe(503);

      // The caller retries, as a 503 says to (here through another gateway).
      second = await buildTestApp(env);
      const retried = await second.inject({ method: 'POST', url: '/webhook/resume', headers: auth });
      expect(retried.statusCode, retried.body).toBe(200);
      expect(retried.json()).toMatchObject({ resent: 3, webhook: { state: 'active', held: 0 } });
      const queued = await second.webhooks.events.queue.getJobs(['waiting', 'delayed', 'prioritized']);
      expect(queued.map((job) => job.data.id).sort()).toEqual(['msg_held1', 'msg_held2', 'msg_held3']);
      // Nothing left to resume now.
      const again = await second.inject({ method: 'POST', url: '/webhook/resume', headers: auth });
      expect(again.statusCode).toBe(409);
    } finally {
      const cleanup = second ?? first;
      await cleanup.inject({ method: 'DELETE', url: '/webhook', headers: auth });
      await cleanup.webhooks.events.queue.obliterate({ force: true }).catch(() => {});
      await Promise.all([disposeTestApp(first).catch(() => {}), second && disposeTestApp(second)]);
    }
  });
});
