import { Inbox } from '@herald/inbox';
import type { LivePublisher } from '@herald/live';
import {
  DEFAULT_PRIORITY,
  DEFAULT_RETRY_POLICY,
  NOTIFY_JOB_NAME,
  type NotificationEvent,
  type NotificationJob,
  notificationJobOptions,
  PRIORITY_MAX,
} from '@herald/protocol';
import { queueConnection, randomId, redisEnv, testRedis, waitFor } from '@herald/testing';
import { Queue } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { processNotification, startWorker } from '../src/worker.js';

function job(userId: string, extra: Partial<NotificationJob> = {}): NotificationJob {
  return { id: randomId('n'), userId, payload: { x: 1 }, createdAt: new Date().toISOString(), ...extra };
}

describe('processNotification', () => {
  let redis: Redis | Cluster;
  let inbox: Inbox;
  const pushed: NotificationEvent[] = [];
  const live: LivePublisher = {
    notification: (_tenant, event) => pushed.push(event),
    unread: () => {},
  };
  beforeAll(() => {
    redis = testRedis();
    inbox = new Inbox(redis, { prefix: `${randomId('inbox')}:` });
  });
  afterAll(() => redis.disconnect());

  it('appends before pushing; a job processed twice is stored once and pushed with the same offset', async () => {
    const user = randomId('u');
    const data = job(user, { topic: 't' });
    const first = await processNotification(data, inbox, live);
    const second = await processNotification(data, inbox, live);
    expect(first.outcome).toBe('appended');
    expect(second.outcome).toBe('already-appended');
    expect((await inbox.read(user)).entries).toHaveLength(1);
    const mine = pushed.filter((event) => event.userId === user);
    // Pushed again (a crash may have cut the first push); realtime drops the second by offset.
    expect(mine).toHaveLength(2);
    expect(mine[0]?.offset).toBe(mine[1]?.offset);
    expect(mine[0]).toMatchObject({ id: data.id, topic: 't', payload: { x: 1 } });
    expect(mine[0]?.unread).toEqual(await inbox.unread(user));
    expect(mine[1]).not.toHaveProperty('unread');
  });

  it('expires after ttlMs and collapses by dedupeKey, pushing nothing for either', async () => {
    const user = randomId('u');
    const before = pushed.length;
    const old = job(user, { ttlMs: 1000, createdAt: new Date(Date.now() - 5000).toISOString() });
    expect((await processNotification(old, inbox, live)).outcome).toBe('expired');
    expect((await processNotification(job(user, { dedupeKey: 'k' }), inbox, live)).outcome).toBe('appended');
    expect((await processNotification(job(user, { dedupeKey: 'k' }), inbox, live)).outcome).toBe(
      'deduplicated',
    );
    expect(pushed.length - before).toBe(1);
  });
});

describe('job options (the gateway uses notificationJobOptions)', () => {
  it('map delayMs and priority, back off exponentially with jitter, and keep failed jobs', () => {
    const options = notificationJobOptions(job('u', { delayMs: 5000, priority: 3 }));
    expect(options).toMatchObject({
      delay: 5000,
      priority: 3,
      attempts: DEFAULT_RETRY_POLICY.attempts,
      backoff: { type: 'exponential', delay: 1000, jitter: 0.5 },
      removeOnFail: false,
    });
    expect(notificationJobOptions(job('u'))).not.toHaveProperty('delay');
    // Without one: the lowest, so that any priority given goes first (BullMQ serves a job without a
    // priority before every prioritised one).
    expect(notificationJobOptions(job('u')).priority).toBe(DEFAULT_PRIORITY);
    expect(DEFAULT_PRIORITY).toBe(PRIORITY_MAX);
  });

  it('a higher-priority job waiting with others is processed first, before those sent without one', async () => {
    const config = loadConfig({
      ...redisEnv(),
      HERALD_QUEUE_NAME: randomId('queue'),
      HERALD_WORKER_CONCURRENCY: '1',
      HERALD_INBOX_PREFIX: `${randomId('inbox')}:`,
    });
    const queue = new Queue<NotificationJob>(config.queue.name, {
      prefix: config.queue.prefix,
      connection: queueConnection(),
    });
    try {
      const user = randomId('u');
      const jobs = [
        job(user),
        job(user, { priority: 10 }),
        job(user),
        job(user, { priority: 10 }),
        job(user, { priority: 1 }),
      ];
      for (const j of jobs) await queue.add(NOTIFY_JOB_NAME, j, notificationJobOptions(j));
      const worker = await startWorker(config, pino({ level: 'silent' }));
      try {
        await waitFor(async () => (await worker.inbox.read(user)).entries.length === 5, {
          timeoutMs: 20_000,
          what: '5 appended',
        });
        // One job at a time (concurrency 1): the inbox order is the order the worker took them in.
        const order = (await worker.inbox.read(user)).entries.map((e) => e.id);
        expect(order).toEqual([4, 1, 3, 0, 2].map((n) => jobs[n]?.id));
      } finally {
        await worker.close();
      }
    } finally {
      await queue.obliterate({ force: true });
      await queue.close();
    }
  });
});

describe('a store Redis refuses', () => {
  it('for its data (WRONGTYPE): it fails at once, retried neither in the worker nor by BullMQ, and the user’s next one is not held back', async () => {
    const config = loadConfig({
      ...redisEnv(),
      HERALD_QUEUE_NAME: randomId('queue'),
      HERALD_INBOX_PREFIX: `${randomId('inbox')}:`,
    });
    const queue = new Queue<NotificationJob>(config.queue.name, {
      prefix: config.queue.prefix,
      connection: queueConnection(),
    });
    const redis = testRedis();
    const worker = await startWorker(config, pino({ level: 'silent' }));
    try {
      const user = randomId('u');
      // The user's stream is a string: every append to it is refused with WRONGTYPE.
      await redis.set(worker.inbox.tenant('default').keys(user).stream, 'not a stream');
      const refused = job(user);
      const next = job(user);
      const retry = { attempts: 2, backoffMs: 60_000, jitter: 0 };
      await queue.add(NOTIFY_JOB_NAME, refused, notificationJobOptions(refused, retry));
      await queue.add(NOTIFY_JOB_NAME, next, notificationJobOptions(next, retry));
      // A store retried in the worker would hold the lane for up to 30 s.
      // Failed for good after its first attempt (no retry can mend it), as a bad argument is: before, it
      // was retried until its attempts ran out (8 by default, about 90 s).
      await waitFor(async () => (await queue.getJobState(refused.id)) === 'failed', {
        timeoutMs: 5_000,
        what: 'the refused notification failed',
      });
      expect((await queue.getJob(refused.id))?.attemptsMade).toBe(1);
      expect((await queue.getJob(refused.id))?.failedReason).toMatch(/WRONGTYPE/);
      // The next one was not held back behind it: it ran, and was refused too.
      await waitFor(async () => (await queue.getJob(next.id))?.attemptsMade === 1, {
        timeoutMs: 5_000,
        what: 'the next one tried',
      });
    } finally {
      await worker.close();
      await queue.obliterate({ force: true });
      await queue.close();
      redis.disconnect();
    }
  });
});
