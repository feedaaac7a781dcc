import { postRetrying503, type RedisClusterHandle, startRedisCluster, waitFor } from '@herald/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clusterStack } from './support/cluster-outage.js';
import { API_KEY, randomId, type Stack } from './support/stack.js';

// An operator restarts a master of a Cluster without replicas (an upgrade), its data kept in its AOF.
// While it is down every slot is refused (cluster_state:fail); once it is back, every app must go on
// by itself: sockets open through the outage are shown what is sent after it, once each, in order.
describe('a Cluster master without a replica restarted while the apps run (its AOF kept)', () => {
  let cluster: RedisClusterHandle;
  const stacks: Stack[] = [];

  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3, args: ['--appendonly', 'yes'] });
  }, 60_000);
  afterAll(async () => {
    for (const stack of stacks) await stack.dispose().catch(() => undefined);
    await cluster?.dispose();
  });

  it('open sockets of users on every master are shown what is sent after it, once each', async () => {
    const second = cluster.servers[1];
    if (!second) throw new Error('no second master');
    const stack = clusterStack(cluster, { HERALD_QUEUE_PARTITIONS: '3' });
    stacks.push(stack);
    const send = async (userId: string, n: number) => {
      const response = await postRetrying503(
        `${gateway.url}/notify`,
        API_KEY,
        { userId, payload: { n } },
        20_000,
      );
      expect(response.status, userId).toBe(202);
      return ((await response.json()) as { id: string }).id;
    };
    const [gateway, realtime, worker] = await Promise.all([
      stack.start('gateway', 'gw'),
      stack.start('realtime', 'rt'),
      stack.start('worker', 'worker'),
    ]);
    // Twelve users: their inboxes, live channels and partitions fall on every master.
    const users = Array.from({ length: 12 }, () => randomId('u'));
    const clients = users.map((user) => stack.client(user));
    for (const client of clients) await client.connect(realtime.url, '0-0');
    const before: string[] = [];
    for (const user of users) before.push(await send(user, 1));
    await waitFor(() => clients.every((client) => client.received.length === 1), {
      timeoutMs: 20_000,
      what: 'the first notifications shown',
    });

    await cluster.stopUntilFailed(second);
    await second.restart();
    await cluster.waitUntilHealthy();

    const after: string[] = [];
    for (const user of users) after.push(await send(user, 2));
    await waitFor(() => clients.every((client) => client.received.length === 2), {
      timeoutMs: 30_000,
      what: 'the notifications sent after the restart shown',
    }).catch(async (error: unknown) => {
      // What each user not shown it has, what the gateway says of the notification, and what the apps
      // warned of: enough to tell a lost live message from a notification never stored.
      const state = await Promise.all(
        clients.map(async (c, i) => {
          if (c.received.length === 2) return `${c.userId}: 2 shown`;
          const status = await fetch(`${gateway.url}/notifications/${after[i]}`, {
            headers: { authorization: `Bearer ${API_KEY}` },
          }).then(async (response) => `${response.status} ${await response.text()}`, String);
          return `${c.userId}: ${c.received.length} shown, ${c.resyncs.length} resyncs; status ${status}`;
        }),
      );
      const warnings = (app: { lines: string[] }) =>
        app.lines.filter((line) => /"level":[4-6]\d/.test(line)).slice(-15);
      throw new Error(
        [String(error), ...state, 'worker:', ...warnings(worker), 'realtime:', ...warnings(realtime)].join(
          '\n',
        ),
      );
    });
    clients.forEach((client, i) => {
      expect(client.received.map((event) => event.id)).toEqual([before[i], after[i]]);
      expect(client.resyncs).toEqual([]);
    });
  }, 120_000);
});
