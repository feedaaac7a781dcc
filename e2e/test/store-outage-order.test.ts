import {
  envelopeJobOptions,
  NOTIFY_ENVELOPE_JOB_NAME,
  NOTIFY_JOB_NAME,
  type NotificationEnvelope,
  notificationJobOptions,
} from '@herald/protocol';
import { type RedisClusterHandle, type RedisServerHandle, startRedisCluster } from '@herald/testing';
import type { Queue } from 'bullmq';
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { notificationJob, randomId, Stack, waitFor } from './support/stack.js';

// A master of a Redis Cluster dies: until its replica takes over (cluster-node-timeout, 2 s here, then the
// election), the worker's appends to the inboxes of its slots fail ("Too many Cluster redirections"),
// while the queue, on another master, goes on handing out jobs. A user's notification whose store failed
// so must still be stored before the same user's later ones, which the queue hands out meanwhile.
describe('a store that fails while a Redis Cluster master fails over', () => {
  let cluster: RedisClusterHandle;
  let stack: Stack;
  const killed: RedisServerHandle[] = [];

  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3, replicas: 1 });
    const nodes = cluster.nodes;
    stack = new Stack(
      `redis://${nodes[0]?.host}:${nodes[0]?.port}`,
      { HERALD_REDIS_CLUSTER_NODES: cluster.nodesEnv },
      () => new Cluster(nodes, { redisOptions: { maxRetriesPerRequest: null } }),
    );
  }, 90_000);
  afterAll(async () => {
    await stack?.dispose();
    await cluster?.dispose();
  });

  /** A new user whose inbox is on a master that has a replica and is neither the queue's nor one killed before. */
  const userAwayFromQueue = async (): Promise<{
    user: string;
    stream: string;
    master: RedisServerHandle;
  }> => {
    const queueMaster = await cluster.masterOf('{herald}');
    for (;;) {
      const user = randomId('u');
      const stream = stack.inbox.tenant('default').keys(user).stream;
      const master = await cluster.masterOf(stream);
      if (master === queueMaster || killed.includes(master)) continue;
      if ((await cluster.replicasOf(master)).length > 0) return { user, stream, master };
    }
  };
  /** Enqueues a notification to `user` as the gateway does, with a retry backoff of `backoffMs`. */
  const send = async (user: string, n: number, backoffMs = 1000): Promise<string> => {
    const job = notificationJob(user, { n });
    await stack.queue.add(
      NOTIFY_JOB_NAME,
      job,
      notificationJobOptions(job, { attempts: 5, backoffMs, jitter: 0 }),
    );
    return job.id;
  };
  /** Stops `master` for good (its replica takes over after cluster-node-timeout). */
  const kill = async (master: RedisServerHandle): Promise<void> => {
    killed.push(master);
    await master.stop();
  };
  /** Returns once a replica has taken over `stream`'s slot from `master`. */
  const promoted = (master: RedisServerHandle, stream: string): Promise<unknown> =>
    waitFor(async () => (await cluster.masterOf(stream)) !== master, {
      timeoutMs: 20_000,
      what: "the replica promoted to master of the inbox's slot",
    });

  it("a user's notification whose store failed is stored before the user's later ones (of an envelope, or sent after the failover); other users' go on", async () => {
    const worker = await stack.start('worker', 'worker');
    const { user, stream, master } = await userAwayFromQueue();
    let other = randomId('other');
    while ((await cluster.masterOf(stack.inbox.tenant('default').keys(other).stream)) === master)
      other = randomId('other');
    await kill(master);
    // Its first store fails within ~2 s (ioredis gives up after 16 redirections); BullMQ would retry it
    // 5 s later.
    const first = await send(user, 1, 5000);
    // An envelope sent after it: the user's next one, and another user's two, whose inbox is up.
    const items = [
      notificationJob(other, { n: 1 }, { seq: 1 }),
      notificationJob(user, { n: 2 }, { seq: 2 }),
      notificationJob(other, { n: 2 }, { seq: 3 }),
    ];
    const envelopeId = `envelope-${randomId('e')}`;
    // The gateway's batches come as envelopes: one job, many notifications (the queue holds both kinds).
    const envelopes = stack.queue as unknown as Queue<NotificationEnvelope>;
    await envelopes.add(NOTIFY_ENVELOPE_JOB_NAME, { items }, envelopeJobOptions(envelopeId));
    await waitFor(async () => (await stack.inboxIds(other)).length === 2, {
      what: "the other user's two stored, while the user's wait",
    });
    await promoted(master, stream);
    const later = [await send(user, 3), await send(user, 4)];
    await waitFor(async () => (await stack.inboxIds(user)).length === 4, {
      timeoutMs: 20_000,
      what: "the user's four stored",
    });
    expect(await stack.inboxIds(user)).toEqual([first, items[1]?.id, ...later]);
    expect(await stack.inboxIds(other)).toEqual([items[0]?.id, items[2]?.id]);
    expect(worker.lines.some((line) => line.includes('store failed'))).toBe(true);
    expect(await worker.stop('SIGTERM')).toBe(0);
  }, 60_000);

  it('SIGTERM while a store fails: the worker exits, and the next one stores each notification once', async () => {
    const worker = await stack.start('worker', 'worker-2');
    const { user, stream, master } = await userAwayFromQueue();
    const ids = [await send(user, 1, 500), await send(user, 2, 500)];
    await waitFor(async () => (await stack.inboxIds(user)).length === 2, { what: 'the first two stored' });
    await kill(master);
    const failing = [await send(user, 3, 500), await send(user, 4, 500)];
    await waitFor(() => worker.lines.some((line) => line.includes('store failed')), {
      what: 'the worker retrying the failed store, the later one waiting',
    });
    // The worker is taken down before the failover is through: what it held goes back to the queue.
    expect(await worker.stop('SIGTERM', 10_000)).toBe(0);
    await promoted(master, stream);
    await stack.start('worker', 'worker-3');
    await waitFor(async () => (await stack.inboxIds(user)).length === 4, {
      timeoutMs: 30_000,
      what: 'all four stored',
    });
    const stored = await stack.inboxIds(user);
    expect(stored.slice(0, 2)).toEqual(ids);
    expect(new Set(stored)).toEqual(new Set([...ids, ...failing]));
  }, 60_000);
});
