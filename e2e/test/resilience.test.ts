import { type RedisServerHandle, redisUrl, startRedisServer } from '@herald/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { randomId, Stack, type TestClient, waitFor } from './support/stack.js';

/** Sends `perUser` notifications to each user, one round (one per user) at a time, paced so they stream. */
async function stream(stack: Stack, users: string[], perUser: number): Promise<Map<string, string[]>> {
  const sent = new Map<string, string[]>(users.map((user) => [user, []]));
  for (let round = 0; round < perUser; round++) {
    const ids = await Promise.all(users.map((user) => stack.send(user, 1)));
    for (const [i, user] of users.entries()) sent.get(user)?.push(...(ids[i] ?? []));
    // Pacing, not synchronisation: spreads the sends over about a second so that faults land mid-stream.
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return sent;
}

function total(clients: TestClient[]): number {
  return clients.reduce((sum, client) => sum + client.received.length, 0);
}

describe('resilience (separate OS processes, real clients)', () => {
  const cleanups: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it('kill -9 of a realtime instance while 1,000 notifications stream to 20 users: reconnecting to the other with lastOffset, every client has every notification once, in order', async () => {
    const stack = new Stack(redisUrl());
    cleanups.push(() => stack.dispose());
    const { a, b } = await stack.startDelivery();
    const users = Array.from({ length: 20 }, (_, i) => randomId(`k9rt${i}`));
    const clients = users.map((user) => stack.client(user));
    await Promise.all(clients.map((client) => client.connect(a.url, '0-0')));

    const sending = stream(stack, users, 50);
    await waitFor(() => total(clients) >= 200, { timeoutMs: 60_000, what: '200 delivered before the kill' });
    a.process.kill('SIGKILL');
    await waitFor(() => clients.every((client) => client.disconnectReason !== undefined), {
      timeoutMs: 30_000,
      what: 'every client to notice',
    });
    const beforeReconnect = total(clients);
    await Promise.all(clients.map((client) => client.connect(b.url, client.lastOffset ?? '0-0')));
    const sent = await sending;
    await waitFor(() => clients.every((client) => client.received.length === 50), {
      timeoutMs: 60_000,
      what: 'all 1,000 on the other instance',
    });
    for (const client of clients) client.check(sent.get(client.userId) ?? []);
    expect(beforeReconnect).toBeLessThan(1000);
  }, 120_000);

  it('kill -9 of the worker in the middle of 2,000 jobs: a new worker finishes, each notification once in the inbox and once on screen', async () => {
    // Short locks so that the new worker takes over the dead one's active jobs in about 2 s, not 30 s.
    const stack = new Stack(redisUrl(), {
      HERALD_WORKER_LOCK_MS: '2000',
      HERALD_WORKER_STALLED_INTERVAL_MS: '1000',
    });
    cleanups.push(() => stack.dispose());
    const [a, b, worker] = await Promise.all([
      stack.start('realtime', 'rt-a'),
      stack.start('realtime', 'rt-b'),
      stack.start('worker', 'worker-1'),
    ]);
    if (!a || !b || !worker) throw new Error('not started');
    const users = Array.from({ length: 10 }, (_, i) => randomId(`k9w${i}`));
    const clients = users.map((user) => stack.client(user));
    await Promise.all(clients.map((client, i) => client.connect(i % 2 === 0 ? a.url : b.url, '0-0')));

    const sent = new Map<string, string[]>();
    for (const user of users) sent.set(user, await stack.send(user, 200));
    await waitFor(() => total(clients) >= 400, { timeoutMs: 60_000, what: '400 processed before the kill' });
    worker.process.kill('SIGKILL');
    const atKill = total(clients);
    await stack.start('worker', 'worker-2');

    await waitFor(() => clients.every((client) => client.received.length >= 200), {
      timeoutMs: 90_000,
      what: 'all 2,000 after the new worker took over',
    });
    for (const client of clients) {
      client.check(sent.get(client.userId) ?? []);
      const inInbox = await stack.inboxIds(client.userId);
      expect(new Set(inInbox).size).toBe(inInbox.length);
      expect([...inInbox].sort()).toEqual([...(sent.get(client.userId) ?? [])].sort());
    }
    expect(atKill).toBeLessThan(2000);
    // Jobs the dead worker had appended but not completed ran again: absorbed by the inbox marker.
    const completed = (await Promise.all(stack.queues.map((queue) => queue.getCompleted(0, 2000)))).flat();
    const rerun = completed.filter(
      (job) => (job.returnvalue as { outcome?: string })?.outcome === 'already-appended',
    );
    process.stderr.write(
      `[worker kill -9] delivered at kill: ${atKill}; jobs re-run after append: ${rerun.length}\n`,
    );
  }, 120_000);

  it('Redis stopped and restarted for 5 s: after recovery no client is missing anything', async () => {
    // Its own redis-server (with an append-only file, as production would) so that others' tests go on.
    const redis: RedisServerHandle = await startRedisServer({
      args: ['--appendonly', 'yes', '--appendfsync', 'always'],
    });
    cleanups.push(() => redis.dispose());
    // Short locks: jobs that were active when Redis stopped are taken over after ~2 s (the default is 30 s).
    const stack = new Stack(redis.url, {
      HERALD_WORKER_LOCK_MS: '2000',
      HERALD_WORKER_STALLED_INTERVAL_MS: '1000',
    });
    cleanups.push(() => stack.dispose());
    const { a, b } = await stack.startDelivery();
    const users = Array.from({ length: 10 }, (_, i) => randomId(`cut${i}`));
    const clients = users.map((user) => stack.client(user));
    await Promise.all(clients.map((client, i) => client.connect(i % 2 === 0 ? a.url : b.url, '0-0')));

    const sending = stream(stack, users, 60);
    await waitFor(() => total(clients) >= 100, { timeoutMs: 60_000, what: '100 delivered before the cut' });
    await redis.stop();
    const atCut = total(clients);
    // The fault itself lasts 5 s (this is the scenario, not a wait for a result).
    await new Promise((resolve) => setTimeout(resolve, 5000));
    await redis.restart();
    const t0 = Date.now();
    process.stderr.write(`[redis cut] at cut ${atCut}, after restart ${total(clients)}\n`);
    const sent = await sending;
    process.stderr.write(`[redis cut] all sent after ${Date.now() - t0} ms; received ${total(clients)}\n`);
    await waitFor(() => clients.every((client) => client.received.length >= 60), {
      timeoutMs: 90_000,
      what: 'all 600 after Redis came back',
    });
    process.stderr.write(`[redis cut] all received after ${Date.now() - t0} ms\n`);
    for (const client of clients) client.check(sent.get(client.userId) ?? []);
    expect(atCut).toBeLessThan(600);
    // Both instances read their sockets' inboxes once their Redis subscriber was back.
    for (const app of [a, b])
      expect(app.lines.some((line) => line.includes('redis back: filling gaps'))).toBe(true);
    // The sockets stayed connected to their realtime instance throughout.
    expect(clients.every((client) => client.disconnectReason === undefined)).toBe(true);
  }, 150_000);
});
