import { Topics } from '@herald/inbox';
import { FANOUT_JOB_NAME, type FanoutJob, fanoutQueueName, notificationJobOptions } from '@herald/protocol';
import { startRedisServer } from '@herald/testing';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { randomId, Stack, topicFanoutJob, waitFor } from './support/stack.js';

describe('a topic send with HERALD_REDIS_WAIT_REPLICAS=1', () => {
  it('pushes no recipient its copy before a replica has it, as single sends do; then exactly once', async () => {
    const primary = await startRedisServer();
    const replica = await startRedisServer({ args: ['--replicaof', '127.0.0.1', String(primary.port)] });
    const probe = new Redis(primary.url);
    const stack = new Stack(primary.url, { HERALD_REDIS_WAIT_REPLICAS: '1' });
    const queue = new Queue<FanoutJob>(fanoutQueueName(stack.env.HERALD_QUEUE_NAME ?? ''), {
      prefix: '{herald}',
      connection: { url: primary.url },
    });
    try {
      await waitFor(async () => /connected_slaves:1/.test(await probe.info('replication')), {
        what: 'the replica attached',
      });
      const [realtime] = await Promise.all([stack.start('realtime', 'rt'), stack.start('worker', 'worker')]);
      const users = [randomId('fan-a'), randomId('fan-b'), randomId('fan-c')];
      await new Topics(stack.redis, { prefix: stack.env.HERALD_INBOX_PREFIX ?? '' }).subscribe('news', users);
      const clients = users.map((user) => stack.client(user));
      await Promise.all(clients.map((client) => client.connect(realtime.url, '0-0')));
      // Frozen, the replica stays attached but acknowledges nothing: every WAIT times out.
      replica.process.kill('SIGSTOP');
      const job = topicFanoutJob('news', { hello: 'replicated' });
      await queue.add(FANOUT_JOB_NAME, job, notificationJobOptions(job));
      // The appends are on the primary, and the attempt fails on its WAIT (retried later)...
      await waitFor(
        async () =>
          (await Promise.all(users.map((user) => stack.inboxIds(user)))).every((ids) => ids.length === 1),
        { timeoutMs: 20_000, what: 'the fan-out appended on the primary' },
      );
      await waitFor(async () => /replica/i.test((await queue.getJob(job.id))?.failedReason ?? ''), {
        timeoutMs: 20_000,
        what: 'an attempt failed on its replica wait',
      });
      // ...before anyone was shown it: a copy shown and then lost in a failover would leave its offset
      // to the next notification.
      for (const client of clients) expect(client.received).toEqual([]);
      replica.process.kill('SIGCONT');
      await waitFor(() => clients.every((client) => client.received.length === 1), {
        timeoutMs: 30_000,
        what: 'every subscriber shown it once the replica has it',
      });
      for (const client of clients) client.check([job.id]);
    } finally {
      replica.process.kill('SIGCONT');
      await queue.close();
      probe.disconnect();
      await stack.dispose();
      await replica.dispose();
      await primary.dispose();
    }
  }, 120_000);
});
