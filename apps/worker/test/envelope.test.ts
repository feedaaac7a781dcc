import { type LiveMessage, LiveSubscriber } from '@herald/live';
import {
  envelopeIndexKey,
  envelopeJobOptions,
  NOTIFY_ENVELOPE_JOB_NAME,
  type NotificationEnvelope,
  type NotificationJob,
} from '@herald/protocol';
import { liveRedis, queueConnection, randomId, redisEnv, testRedis, waitFor } from '@herald/testing';
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

describe('an envelope job', () => {
  it('stores and pushes each notification once, in send order per user; one that cannot be stored fails as its own job; the index forgets them all', async () => {
    const pubsubKey = randomId('pubsub');
    const config = loadConfig({
      ...redisEnv(),
      HERALD_QUEUE_NAME: randomId('queue'),
      HERALD_PUBSUB_KEY: pubsubKey,
      HERALD_INBOX_PREFIX: `${randomId('inbox')}:`,
    });
    const redis = testRedis();
    const queue = new Queue<NotificationEnvelope>(config.queue.name, {
      prefix: config.queue.prefix,
      connection: queueConnection(),
    });
    const live = new LiveSubscriber(liveRedis(), { key: pubsubKey, mode: config.pubsubMode });
    const received: LiveMessage[] = [];
    const alice = live.subscribe('default', 'alice', (message) => received.push(message));
    await alice.ready;
    const worker = await startWorker(config, pino({ level: 'silent' }));
    cleanups.push(async () => {
      await alice.close();
      await worker.close();
      await queue.obliterate({ force: true });
      await queue.close();
      redis.disconnect();
    });

    // Alice's five in send order, interleaved with Bob's, and one whose data can never be stored.
    const bad = { ...item('', 99) };
    const items = [
      item('alice', 1),
      item('bob', 2),
      item('alice', 3),
      bad,
      item('alice', 4),
      item('bob', 5),
      item('alice', 6),
      item('alice', 7),
    ];
    const envelopeId = `envelope-${randomId('e')}`;
    const index = envelopeIndexKey(config.queue);
    await redis.hset(index, ...items.flatMap((entry) => [entry.id, envelopeId]));
    await queue.add(
      NOTIFY_ENVELOPE_JOB_NAME,
      { items },
      envelopeJobOptions(envelopeId, { attempts: 3, backoffMs: 10, jitter: 0 }),
    );

    const good = items.filter((entry) => entry !== bad);
    await waitFor(async () => (await redis.hlen(index)) === 0, { what: 'the index to forget the envelope' });
    // Stored once each, Alice's in her send order.
    const aliceIds = good.filter((entry) => entry.userId === 'alice').map((entry) => entry.id);
    const page = await worker.inbox.list('alice', { limit: 100 });
    expect(page.items.map((stored) => stored.id)).toEqual(aliceIds);
    expect((await worker.inbox.list('bob', { limit: 100 })).items).toHaveLength(2);
    await waitFor(() => received.length === aliceIds.length, { what: "Alice's live notifications" });
    expect(received.map((message) => (message as { event?: { id: string } }).event?.id ?? '')).toEqual(
      aliceIds,
    );
    // The one that could not be stored: its own job, failed for good, with its own id; the envelope is done.
    await waitFor(async () => (await queue.getJobState(bad.id)) === 'failed', { what: 'the bad one failed' });
    const failed = await queue.getJob(bad.id);
    expect(failed?.name).toBe('notify');
    expect(failed?.failedReason).toMatch(/userId/i);
    await waitFor(async () => (await queue.getJobState(envelopeId)) === 'completed', {
      what: 'the envelope completed',
    });
  });
});
