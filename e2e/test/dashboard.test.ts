import type { AdminSnapshot } from '@herald/protocol';
import { type AppProcess, redisUrl, startApp } from '@herald/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { entries, randomId, Stack, waitFor } from './support/stack.js';

// 32+ bytes, and none of the API keys.
const ADMIN_KEY = 'e2e-admin-key-0123456789abcdef0123456789';

describe('the admin snapshot of realtime instances, as processes: connections, resumes, latency', () => {
  let stack: Stack;
  let gateway: AppProcess;
  let a: AppProcess;
  let b: AppProcess;

  beforeAll(async () => {
    // An inbox of 5: a client away for more than 5 notifications comes back to a trimmed offset.
    stack = new Stack(redisUrl(), { HERALD_ADMIN_KEY: ADMIN_KEY, HERALD_INBOX_MAX_LENGTH: '5' });
    [gateway, { a, b }] = await Promise.all([
      startApp({ name: 'gateway', entry: entries.gateway, env: stack.env }).then((app) => {
        stack.processes.push(app);
        return app;
      }),
      stack.startDelivery(),
    ]);
  });
  afterAll(async () => {
    await stack.dispose();
  });

  async function snapshot(): Promise<AdminSnapshot> {
    const response = await fetch(`${gateway.url}/admin/snapshot`, {
      headers: { authorization: `Bearer ${ADMIN_KEY}` },
    });
    expect(response.status).toBe(200);
    return (await response.json()) as AdminSnapshot;
  }

  /** A fresh client of a new user on `instance`, given one notification live, then away for `missed`. */
  async function away(name: string, instance: AppProcess, missed: number) {
    const client = stack.client(randomId(name));
    await client.connect(instance.url);
    await stack.send(client.userId, 1);
    await waitFor(() => client.received.length === 1, { what: `${name}’s first` });
    client.disconnect();
    const last = (await stack.send(client.userId, missed)).at(-1) ?? '';
    // Away until the worker has stored them all (one user's in send order: the last one last).
    await waitFor(async () => (await stack.inboxIds(client.userId)).includes(last), {
      what: `${name}’s ${missed} missed in the inbox`,
    });
    return client;
  }

  it('reports each instance’s connections, fresh / recovered / resync, and the latency of acked live notifications', async () => {
    // alice: fresh on rt-a, receives 3 live notifications and acks them.
    const alice = stack.client(randomId('alice'));
    await alice.connect(a.url);
    const sent = await stack.send(alice.userId, 3);
    await waitFor(() => alice.received.length === 3, { what: 'alice’s notifications' });
    // Another user's ack of alice's ids (one of another tenant would be the same) acks nothing and takes
    // no sample: only an ack that the inbox recorded counts, the first one.
    const eve = stack.client(randomId('eve'));
    await eve.connect(a.url);
    expect(await eve.command('ack', { ids: sent })).toMatchObject({ ok: true, changed: 0 });
    eve.disconnect();
    const acked = sent.slice(0, 2);
    expect(await alice.command('ack', { ids: acked })).toMatchObject({ ok: true, changed: 2 });
    // An ack again, or of an id never sent live here, is no new sample.
    expect(await alice.command('ack', { ids: [...acked, 'nope'] })).toMatchObject({ ok: true, changed: 0 });

    // bob: fresh on rt-b, away for 3 notifications, back on rt-b from his offset: recovered, 3 replayed.
    const bob = await away('bob', b, 3);
    await bob.connect(b.url, bob.lastOffset);
    expect(bob.synced.at(-1)?.replayed).toBe(3);

    // carol: fresh on rt-a, away for 7 (the inbox keeps 5), back on rt-b: resync.
    const carol = await away('carol', a, 7);
    await carol.connect(b.url, carol.lastOffset);
    expect(carol.resyncs).toHaveLength(1);

    const expected = await waitFor(
      async () => {
        const current = await snapshot();
        const connections = Object.fromEntries(current.realtime.map((rt) => [rt.instanceId, rt.connections]));
        // Each instance flushes its counts once a second: wait for every connection's outcome (six:
        // alice, eve, bob twice, carol twice; rt-a's flush of carol's first can come after rt-b's of her
        // second), then compare them exactly below.
        const { fresh, recovered, resync } = current.resume;
        return connections['rt-a'] === 1 &&
          connections['rt-b'] === 2 &&
          fresh + recovered + resync >= 6 &&
          current.latency.count === 2
          ? current
          : undefined;
      },
      { timeoutMs: 10_000, what: 'the instances’ flushes in the snapshot' },
    );
    expect(expected.resume).toEqual({ fresh: 4, recovered: 1, resync: 1, replayed: 3 });
    expect(expected.latency.count).toBe(2);
    expect(expected.realtime.map((rt) => rt.instanceId)).toEqual(['rt-a', 'rt-b']);
    // Live notifications on a quiet loopback: acked within seconds, never "before" they were sent.
    expect(expected.latency.p50).toBeGreaterThan(0);
    expect(expected.latency.max).toBeLessThan(10_000);
    expect(expected.latency.p50).toBeLessThanOrEqual(expected.latency.p99 ?? 0);

    // An instance that stops leaves the list (its goodbye removes its heartbeat).
    await b.stop();
    await waitFor(async () => (await snapshot()).realtime.every((rt) => rt.instanceId !== 'rt-b'), {
      what: 'rt-b gone from the snapshot',
    });
  });
});
