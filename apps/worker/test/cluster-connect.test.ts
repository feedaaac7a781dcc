import { createRedis } from '@herald/config';
import { type RedisClusterHandle, startRedisCluster, waitFor } from '@herald/testing';
import { Queue, Worker } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// BullMQ gets a worker's blocking connection back, after its watchdog reset it, by awaiting `connect()`
// of the Cluster client the worker gave it (a duplicate). ioredis's own promise never settled when the
// ready check met a Cluster with a master down: the worker's fetch loop waited for good, and its
// partition was consumed no more once the Cluster was whole (e2e/test/cluster-restart, 3 users of one
// partition never shown what was sent after a master restart).
describe('a Cluster client of the apps, connected while a master is down', () => {
  let cluster: RedisClusterHandle;
  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3 });
  }, 60_000);
  afterAll(async () => cluster?.dispose());

  it('settles connect() once the Cluster is whole, and so does its duplicate', async () => {
    const down = cluster.servers[1];
    if (!down) throw new Error('no second master');
    await cluster.stopUntilFailed(down);
    const target = { url: cluster.servers[0]?.url ?? '', clusterNodes: cluster.nodes };
    const client = createRedis(target, 'worker', {}, { lazyConnect: true });
    const copy = client.duplicate();
    const clients = [client, copy];
    try {
      const settled = clients.map(() => 'pending');
      let retries = 0;
      clients.forEach((each, i) => {
        each.on('error', () => {});
        each.on('reconnecting', () => retries++);
        each.connect().then(
          () => {
            settled[i] = 'resolved';
          },
          (error: unknown) => {
            settled[i] = `rejected: ${String(error)}`;
          },
        );
      });
      // Both read the slot table, fail the ready check, and retry.
      await waitFor(() => retries >= 4, { timeoutMs: 15_000, what: 'retries while the Cluster fails' });
      expect(settled).toEqual(['pending', 'pending']);

      await down.restart();
      await cluster.waitUntilHealthy();
      await waitFor(() => settled.every((state) => state !== 'pending'), {
        timeoutMs: 20_000,
        what: 'connect() settled once the Cluster is whole',
      }).catch((error: unknown) => {
        throw new Error(
          `${String(error)}: ${JSON.stringify(settled)}, status ${clients.map((c) => c.status)}`,
        );
      });
      expect(settled).toEqual(['resolved', 'resolved']);
      expect(await copy.set('{x}:k', 'v')).toBe('OK');
    } finally {
      for (const each of clients) each.disconnect();
    }
  }, 120_000);

  it("lets BullMQ get a worker's blocking connection back, and the worker take jobs after", async () => {
    const target = { url: cluster.servers[0]?.url ?? '', clusterNodes: cluster.nodes };
    const connection = createRedis(target, 'worker');
    connection.on('error', () => {});
    const done: string[] = [];
    const worker = new Worker(
      'cluster-connect',
      async (job) => {
        done.push(job.id ?? '');
      },
      { connection, prefix: '{cluster-connect}', autorun: false },
    );
    worker.on('error', () => {});
    await worker.waitUntilReady();
    // What BullMQ's watchdog does to a blocking connection whose command never settled
    // (resetBlockedConnection): disconnect, then `reconnect()`, which awaits the client's `connect()`.
    type Blocking = { disconnect(wait?: boolean): Promise<void>; reconnect(): Promise<void> };
    const blocking = (worker as unknown as { backend: { blockingConnection: Blocking } }).backend
      .blockingConnection;
    const down = cluster.servers[2];
    if (!down) throw new Error('no third master');
    try {
      await cluster.stopUntilFailed(down);
      await blocking.disconnect(true);
      let settled = 'pending';
      blocking.reconnect().then(
        () => {
          settled = 'resolved';
        },
        (error: unknown) => {
          settled = `rejected: ${String(error)}`;
        },
      );
      await down.restart();
      await cluster.waitUntilHealthy();
      await waitFor(() => settled !== 'pending', {
        timeoutMs: 20_000,
        what: "BullMQ's reconnect of the blocking connection settled",
      });
      expect(settled).toBe('resolved');
      void worker.run();
      const queue = new Queue('cluster-connect', { prefix: '{cluster-connect}', connection });
      await queue.add('job', {}, { jobId: 'after-the-outage' });
      await waitFor(() => done.includes('after-the-outage'), { timeoutMs: 20_000, what: 'the job taken' });
      await queue.close();
    } finally {
      await worker.close(true);
      connection.disconnect();
    }
  }, 120_000);
});
