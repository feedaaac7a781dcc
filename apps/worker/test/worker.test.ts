import { type LiveMessage, LiveSubscriber } from '@herald/live';
import { NOTIFY_JOB_NAME, type NotificationJob } from '@herald/protocol';
import { liveRedis, queueConnection, randomId, redisEnv, waitFor } from '@herald/testing';
import { Queue } from 'bullmq';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { type NotificationWorker, startWorker } from '../src/worker.js';

describe('worker', () => {
  const cleanups: (() => Promise<unknown> | unknown)[] = [];
  let queue: Queue<NotificationJob>;
  let worker: NotificationWorker;
  let live: LiveSubscriber;
  const pubsubKey = randomId('pubsub');

  beforeEach(async () => {
    const config = loadConfig({
      ...redisEnv(),
      HERALD_QUEUE_NAME: randomId('queue'),
      HERALD_PUBSUB_KEY: pubsubKey,
      HERALD_INBOX_PREFIX: `${randomId('inbox')}:`,
    });
    worker = await startWorker(config, pino({ level: 'silent' }));
    queue = new Queue(config.queue.name, {
      prefix: config.queue.prefix,
      connection: queueConnection(),
    });
    cleanups.push(async () => {
      await worker.close();
      await queue.obliterate({ force: true });
      await queue.close();
    });

    // A live subscriber on the same pub/sub key, standing in for a realtime instance.
    const sub = liveRedis();
    live = new LiveSubscriber(sub, { key: pubsubKey, mode: config.pubsubMode });
    cleanups.push(() => sub.disconnect());
  });

  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it('publishes each job on the live channel of its user as a `notification` message and completes it', async () => {
    const received: LiveMessage[] = [];
    const receivedByOther: LiveMessage[] = [];
    const alice = live.subscribe('default', 'alice', (message) => received.push(message));
    const bob = live.subscribe('default', 'bob', (message) => receivedByOther.push(message));
    cleanups.push(
      () => alice.close(),
      () => bob.close(),
    );
    await Promise.all([alice.ready, bob.ready]);

    const job: NotificationJob = {
      id: randomId('n'),
      userId: 'alice',
      payload: { text: 'hi' },
      createdAt: new Date().toISOString(),
    };
    await queue.add(NOTIFY_JOB_NAME, job, { jobId: job.id });

    await waitFor(() => received.length === 1, { what: 'the notification' });
    expect(received[0]).toEqual({
      v: 1,
      kind: 'notification',
      tenantId: 'default',
      userId: 'alice',
      event: {
        ...job,
        offset: expect.stringMatching(/^\d+-1$/),
        unread: { count: 1, version: expect.any(Number) },
      },
    });
    await waitFor(async () => (await queue.getJobState(job.id)) === 'completed', {
      what: 'the job to complete',
    });
    expect(receivedByOther).toEqual([]);
  });

  it('completes a job for a user nobody is connected as', async () => {
    const job: NotificationJob = {
      id: randomId('n'),
      userId: 'nobody',
      payload: {},
      createdAt: new Date().toISOString(),
    };
    await queue.add(NOTIFY_JOB_NAME, job, { jobId: job.id });
    await waitFor(async () => (await queue.getJobState(job.id)) === 'completed', {
      what: 'the job to complete',
    });
  });
});
