import { queueConnection, randomId, testRedis } from '@herald/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { WebhookEvents, WebhookStore } from '../src/index.js';

const redis = testRedis();
afterAll(() => redis.disconnect());

describe('WebhookEvents (the webhook queue)', () => {
  it('keeps what it enqueues for a bounded time: completed messages an hour (at most 10,000), messages failed for good 7 days', async () => {
    const prefix = `{${randomId('wh')}}`;
    const store = new WebhookStore(redis, `${prefix}:`);
    const tenantId = randomId('tenant');
    await store.set(tenantId, { url: 'https://hooks.example.com/herald' });
    const events = new WebhookEvents(store, {
      queueName: randomId('q'),
      prefix,
      connection: queueConnection(),
    });
    try {
      const at = new Date().toISOString();
      expect(await events.read(tenantId, 'alice', ['n-1'], Date.parse('2026-12-07T04:00:00.000Z'))).toBe(1);
      expect(
        await events.resend([
          {
            id: 'msg_x',
            tenantId,
            payload: {
              type: 'notification.read',
              timestamp: at,
              data: { notificationId: 'n-2', userId: 'alice', at },
            },
          },
        ]),
      ).toBe(1);
      const jobs = await events.queue.getJobs(['wait']);
      expect(jobs).toHaveLength(2);
      // Each message names the webhook it was produced for (its creation time): one deleted since is
      // dropped, never sent to a webhook created after it.
      const createdAt = (await store.record(tenantId))?.createdAt;
      expect(createdAt).toBeTruthy();
      expect(jobs.find((job) => job.data.payload.data.notificationId === 'n-1')?.data.webhook).toBe(
        createdAt,
      );
      // The read's own time (Redis's, from the read script), not when it was enqueued.
      expect(jobs.find((job) => job.data.payload.data.notificationId === 'n-1')?.data.payload.data.at).toBe(
        '2026-12-07T04:00:00.000Z',
      );
      // Produced (`timestamp`) never before it happened (`at`), though the two come from different
      // readings of Redis's clock: a read stamped a little ahead of this process's estimate.
      const ahead = Date.now() + 60_000;
      expect(await events.read(tenantId, 'alice', ['n-3'], ahead)).toBe(1);
      const [late] = (await events.queue.getJobs(['wait'])).filter(
        (job) => job.data.payload.data.notificationId === 'n-3',
      );
      expect(Date.parse(late?.data.payload.timestamp ?? '')).toBeGreaterThanOrEqual(ahead);
      for (const job of jobs) {
        expect(job.opts).toMatchObject({
          removeOnComplete: { age: 3600, count: 10_000 },
          // Age only, no count: a tenant whose endpoint fails a lot cannot push out another's records.
          removeOnFail: { age: 7 * 24 * 3600 },
        });
      }
    } finally {
      await events.queue.obliterate({ force: true });
      await events.queue.close();
    }
  });
});
