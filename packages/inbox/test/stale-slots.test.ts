import { type RedisClusterHandle, randomId, startRedisCluster } from '@herald/testing';
import calculateSlot from 'cluster-key-slot';
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Inbox, notificationIdFor } from '../src/index.js';

// The reads of a user's inbox go in one pipeline. On a Cluster whose slot moved since the client read its
// table (a resharding, a master restarted), its keyed commands come back MOVED while a keyless TIME is
// answered, and ioredis replays a pipeline only when every command of it was redirected: those errors
// were read as empty replies, an unread count of 0 with a version from Redis's clock (which a client
// that keeps the highest version then held against every true count after it), a notification not
// found, a page of items all read.
describe("a user's reads on a Cluster client whose slot table is stale", () => {
  let cluster: RedisClusterHandle;
  let client: Cluster;
  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3, replicas: 0 });
    client = new Cluster(cluster.nodes);
  }, 120_000);
  afterAll(async () => {
    client?.disconnect();
    await cluster?.dispose();
  });

  /** Points the client's table for `user`'s slot at another master, as a table from before a move. */
  function stale(inbox: Inbox, user: string): void {
    const slot = calculateSlot(inbox.keys(user).stream);
    const owner = client.slots[slot]?.[0];
    const other = client.slots.find((owners) => owners?.[0] !== undefined && owners[0] !== owner);
    if (other === undefined) throw new Error('one master only');
    client.slots[slot] = [...other];
  }

  it('answer what is stored: unread count and version, status, listing', async () => {
    const inbox = new Inbox(client, { prefix: `${randomId('stale')}:` });
    await client.ping();
    const user = randomId('u');
    const ids = [notificationIdFor(user), notificationIdFor(user), notificationIdFor(user)];
    for (const [n, id] of ids.entries())
      await inbox.append({ id, userId: user, payload: { n }, createdAt: new Date().toISOString() });
    await inbox.markRead(user, { ids: [ids[0] ?? ''] });
    const truth = await inbox.unread(user);
    expect(truth.count).toBe(2);

    stale(inbox, user);
    expect(await inbox.unread(user)).toEqual(truth);
    stale(inbox, user);
    expect(await inbox.status(user, ids[1] ?? '')).toMatchObject({ state: 'inbox', read: false });
    stale(inbox, user);
    expect(await inbox.statusById(ids[0] ?? '')).toMatchObject({ userId: user, read: true });
    stale(inbox, user);
    const page = await inbox.list(user, { limit: 10 });
    expect(page.items.map((item) => [item.id, item.read])).toEqual([
      [ids[0], true],
      [ids[1], false],
      [ids[2], false],
    ]);
    expect(page.unread).toEqual(truth);
  });
});
