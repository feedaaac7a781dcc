import { signUserToken, type UnreadChangeEvent } from '@herald/protocol';
import type { AppProcess } from '@herald/testing';
import { redisUrl } from '@herald/testing';
import { io } from 'socket.io-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { notificationJob, randomId, SECRET, Stack, waitFor } from './support/stack.js';

// One stack for this file: two realtime instances and one worker, each its own OS process.
describe('delivery: inbox, replay, acks, read state (2 realtime instances + 1 worker, real clients)', () => {
  let stack: Stack;
  let a: AppProcess;
  let b: AppProcess;

  beforeAll(async () => {
    stack = new Stack(redisUrl());
    ({ a, b } = await stack.startDelivery());
  });
  afterAll(async () => {
    await stack.dispose();
  });

  it('offline then online: 50 sent while offline arrive on either instance, all, in order, once', async () => {
    const user = randomId('offline');
    const sent = await stack.send(user, 50);
    await waitFor(async () => (await stack.inboxIds(user)).length === 50, {
      timeoutMs: 30_000,
      what: '50 in the inbox',
    });

    const onA = stack.client(user);
    const onB = stack.client(user);
    await Promise.all([onA.connect(a.url, '0-0'), onB.connect(b.url, '0-0')]);
    for (const client of [onA, onB]) {
      client.check(sent);
      expect(client.synced[0]).toMatchObject({ replayed: 50, unread: { count: 50 } });
    }
    // The inbox order is the offset order; with one producer batch it is also the send order.
    expect(onA.received.map((e) => e.id)).toEqual(await stack.inboxIds(user));

    // A client that saw the first 20 gets exactly the other 30, then live ones, no seam.
    const later = stack.client(user);
    await later.connect(b.url, onA.received[19]?.offset);
    expect(later.received.map((e) => e.id)).toEqual(onA.received.slice(20).map((e) => e.id));
    const live = await stack.send(user, 5);
    await waitFor(() => later.received.length === 35 && onA.received.length === 55, {
      timeoutMs: 30_000,
      what: 'live after replay',
    });
    later.check([...onA.received.slice(20).map((e) => e.id)]);
    expect(
      later.received
        .slice(30)
        .map((e) => e.id)
        .sort(),
    ).toEqual([...live].sort());
    onA.check([...sent, ...live]);
  });

  it('replays while notifications keep arriving: no gap and no duplicate at the seam', async () => {
    const user = randomId('seam');
    const first = await stack.send(user, 300);
    const client = stack.client(user);
    // Connect while the worker is still appending the first 300 and more are being sent.
    const more = stack.send(user, 300);
    await client.connect(a.url, '0-0');
    const all = [...first, ...(await more)];
    await waitFor(() => client.received.length >= 600, { timeoutMs: 60_000, what: '600 notifications' });
    client.check(all);
  });

  it('without lastOffset: live only from now; with a trimmed offset: resync', async () => {
    const user = randomId('fresh');
    await stack.send(user, 3);
    await waitFor(async () => (await stack.inboxIds(user)).length === 3, { what: 'inbox' });
    const client = stack.client(user);
    await client.connect(a.url);
    expect(client.received).toEqual([]);
    expect(client.synced[0]?.lastOffset).toMatch(/-3$/);
    const live = await stack.send(user, 2);
    await waitFor(() => client.received.length === 2, { what: 'live' });
    client.check(live);

    // An offset whose successors are no longer kept (here: from another inbox generation).
    const stale = stack.client(user);
    await stale.connect(b.url, '1-999');
    expect(stale.resyncs).toHaveLength(1);
    expect(stale.resyncs[0]).toMatchObject({ lastOffset: client.lastOffset });
  });

  it('a lastOffset past the newest, with seq 0: resync to the newest, then live (not a silent dead stream)', async () => {
    const user = randomId('future');
    await stack.send(user, 2);
    await waitFor(async () => (await stack.inboxIds(user)).length === 2, { what: 'inbox' });
    const client = stack.client(user);
    await client.connect(a.url, '99999999999999-0');
    expect(client.resyncs).toHaveLength(1);
    expect(client.resyncs[0]?.lastOffset).toMatch(/-2$/);
    const live = await stack.send(user, 2);
    await waitFor(() => client.received.length === 2, { what: 'live after the resync' });
    client.check(live);
  });

  it('acks record delivered once, with time and instance; status shows it', async () => {
    const user = randomId('ack');
    const [id] = await stack.send(user, 1);
    const client = stack.client(user);
    await client.connect(b.url, '0-0');
    await waitFor(() => client.received.length === 1, { what: 'the notification' });
    expect(await stack.inbox.status(user, id ?? '')).toMatchObject({ delivered: false });
    expect(await client.command('ack', { ids: [id] })).toEqual({ ok: true, changed: 1 });
    expect(await client.command('ack', { ids: [id] })).toEqual({ ok: true, changed: 0 });
    const status = await stack.inbox.status(user, id ?? '');
    expect(status).toMatchObject({ delivered: true, deliveredBy: 'rt-b', state: 'inbox', read: false });
    expect(await client.command('ack', { nope: 1 })).toMatchObject({
      ok: false,
      code: 'HERALD_ERR_INBOX_INVALID_ARGUMENT',
    });
  });

  it('unread count stays exact under 20 concurrent senders and 3 tabs marking read, pushed to every tab', async () => {
    const user = randomId('unread');
    const tabs = [stack.client(user), stack.client(user), stack.client(user)];
    await Promise.all(tabs.map((tab, i) => tab.connect(i === 1 ? b.url : a.url)));
    const marked = new Set<string>();
    const marking: Promise<unknown>[] = [];
    // Each tab marks read, as notifications arrive, those with n % 4 === its index, and every tab those
    // with n % 7 === 0 (so that tabs race on the same ids); n % 4 === 3 stays unread unless n % 7 === 0.
    tabs.forEach((tab, t) => {
      tab.socket?.on('notification', (event: { id: string; payload: { n: number } }) => {
        const n = event.payload.n;
        if (n % 4 === t || n % 7 === 0) {
          marked.add(event.id);
          marking.push(tab.command('read', { ids: [event.id] }));
        }
      });
    });
    const sent = (await Promise.all(Array.from({ length: 20 }, () => stack.send(user, 25)))).flat();
    await waitFor(() => tabs.every((tab) => tab.received.length === sent.length), {
      timeoutMs: 60_000,
      what: 'all on every tab',
    });
    for (const tab of tabs) tab.check(sent);
    await Promise.all(marking);
    const expected = sent.length - marked.size;
    expect(expected).toBeGreaterThan(50);
    expect((await stack.inbox.unread(user)).count).toBe(expected);
    await waitFor(() => tabs.every((tab) => tab.unread?.count === expected), {
      timeoutMs: 30_000,
      what: 'final count on every tab',
    });

    // read-all: zero, pushed everywhere, with the ids it marked read (so that lists follow, not only badges).
    const pushed: UnreadChangeEvent[] = [];
    tabs[1]?.socket?.on('unread', (event: UnreadChangeEvent) => pushed.push(event));
    const stillUnread = sent.filter((id) => !marked.has(id));
    expect(await tabs[0]?.command('read-all', {})).toMatchObject({ ok: true });
    await waitFor(() => tabs.every((tab) => tab.unread?.count === 0), { what: 'zero on every tab' });
    await waitFor(() => pushed.some((event) => event.count === 0), { what: 'the read-all pushed' });
    expect([...(pushed.find((event) => event.count === 0)?.read ?? [])].sort()).toEqual(stillUnread.sort());
  });

  it('a user’s token cannot receive, replay, ack or read another user’s notifications', async () => {
    const alice = randomId('alice');
    const mallory = randomId('mallory');
    const aliceIds = await stack.send(alice, 5);
    await waitFor(async () => (await stack.inboxIds(alice)).length === 5, { what: 'alice inbox' });
    const aliceClient = stack.client(alice);
    await aliceClient.connect(a.url, '0-0');
    const aliceOffset = aliceClient.received[0]?.offset;

    const intruder = stack.client(mallory);
    // Replaying "after alice's first offset" replays mallory's own (empty) inbox, nothing of alice's.
    await intruder.connect(a.url, aliceOffset);
    expect(intruder.received).toEqual([]);
    // Acks and reads of alice's ids change nothing.
    expect(await intruder.command('ack', { ids: aliceIds })).toEqual({ ok: true, changed: 0 });
    expect(await intruder.command('read', { ids: aliceIds })).toMatchObject({ ok: true, changed: 0 });
    expect(await intruder.command('read-all', {})).toMatchObject({ ok: true, changed: 0 });
    expect((await stack.inbox.unread(alice)).count).toBe(5);
    for (const id of aliceIds)
      expect(await stack.inbox.status(alice, id)).toMatchObject({ delivered: false, read: false });
    // Live: alice's next notification reaches alice only.
    const [next] = await stack.send(alice, 1);
    const [fence] = await stack.send(mallory, 1);
    await waitFor(() => intruder.received.length === 1 && aliceClient.received.length === 6, {
      what: 'fences',
    });
    expect(intruder.received.map((e) => e.id)).toEqual([fence]);
    expect(aliceClient.received.at(-1)?.id).toBe(next);
  });

  it('honours ttlMs (expired, never shown), dedupeKey (collapsed) and delayMs', async () => {
    const user = randomId('opts');
    const client = stack.client(user);
    await client.connect(a.url);
    const expired = await stack.send(user, 1, {
      ttlMs: 1000,
      createdAt: new Date(Date.now() - 60_000).toISOString(),
    });
    const [first] = await stack.send(user, 1, { dedupeKey: 'build-42' });
    const [second] = await stack.send(user, 1, { dedupeKey: 'build-42' });
    const delayed = await stack.send(user, 1, { delayMs: 300 });
    await waitFor(() => client.received.length === 2, {
      timeoutMs: 30_000,
      what: 'one of the pair and delayed',
    });
    // Concurrent workers may store either of the two first: exactly one is shown, the other collapses into it.
    const shown = client.received.map((e) => e.id).filter((id) => id !== delayed[0]);
    expect(shown).toHaveLength(1);
    const kept = shown[0] as string;
    expect([first, second]).toContain(kept);
    const collapsed = (kept === first ? second : first) as string;
    await waitFor(async () => (await stack.inbox.status(user, collapsed))?.state === 'deduplicated', {
      what: 'dedupe record',
    });
    expect(await stack.inbox.status(user, collapsed)).toMatchObject({ duplicateOf: kept });
    expect(await stack.inbox.status(user, expired[0] ?? '')).toMatchObject({
      state: 'expired',
      delivered: false,
    });
    expect(await stack.queueOf(user).getJobState(delayed[0] ?? '')).toBe('completed');
  });

  it('handshake errors say what is wrong: bad lastOffset, too many connections, polling without opt-in', async () => {
    const user = randomId('limits');
    const client = stack.client(user);
    await expect(client.connect(a.url, 'not-an-offset')).rejects.toMatchObject({
      data: { code: 'HERALD_ERR_OFFSET_INVALID' },
    });
    // null, as clients of other languages send an optional field they leave out: absent, live from now.
    const nullOffset = stack.client(randomId('null-offset'));
    await nullOffset.connect(a.url, undefined, { lastOffset: null });
    expect(nullOffset.synced.at(-1)).toMatchObject({ replayed: 0 });
    nullOffset.disconnect();
    const limited = await stack.start('realtime', 'rt-limited', {
      HERALD_MAX_CONNECTIONS_PER_USER: '2',
      HERALD_PING_INTERVAL_MS: '1000',
      HERALD_ALLOW_POLLING: 'true',
    });
    const tabs = [stack.client(user), stack.client(user), stack.client(user)];
    await tabs[0]?.connect(limited.url);
    await tabs[1]?.connect(limited.url);
    const error = await tabs[2]?.connect(limited.url).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toMatchObject({ data: { code: 'HERALD_ERR_TOO_MANY_CONNECTIONS' } });
    // Heartbeat: the server pings every HERALD_PING_INTERVAL_MS (the client answers; a silent one is dropped).
    let pings = 0;
    tabs[1]?.socket?.io.engine.on('ping', () => pings++);
    await waitFor(() => pings >= 2, { timeoutMs: 15_000, what: 'two heartbeats' });
    expect(String((error as Error).message)).toMatch(/limit/);
    // One closes: a new one fits again.
    tabs[0]?.disconnect();
    await waitFor(
      () =>
        tabs[2]?.connect(limited.url).then(
          () => true,
          () => false,
        ),
      { what: 'a connection after one closed' },
    );

    // Default transports: WebSocket only; polling is refused (it needs sticky sessions: opt-in).
    const health = (await (await fetch(`${a.url}/healthz`)).json()) as {
      status: string;
      connections: number;
    };
    expect(health).toMatchObject({ status: 'ok', instanceId: 'rt-a' });
    const polling = io(a.url, { transports: ['polling'], reconnection: false, forceNew: true, auth: {} });
    const pollingError = await new Promise<Error>((resolve) => polling.once('connect_error', resolve));
    polling.close();
    expect(pollingError).toBeInstanceOf(Error);
    // Opted in (HERALD_ALLOW_POLLING=true; needs sticky sessions behind a load balancer): polling connects.
    const optedIn = io(limited.url, {
      transports: ['polling'],
      reconnection: false,
      forceNew: true,
      auth: {
        token: await signUserToken({
          tenantId: 'default',
          keyId: 'test-key',
          userId: randomId('poll'),
          secret: SECRET,
          ttlSeconds: 60,
        }).then((t) => t.token),
      },
    });
    await new Promise<void>((resolve, reject) => {
      optedIn.once('connect', resolve);
      optedIn.once('connect_error', reject);
    });
    expect(optedIn.io.engine.transport.name).toBe('polling');
    optedIn.close();
  });

  it('disconnects with a reason when the token expires, and says goodbye on shutdown', async () => {
    const user = randomId('expiry');
    const shortLived = stack.client(user, { ttlSeconds: 4 });
    await shortLived.connect(a.url);
    await waitFor(() => shortLived.disconnectReason !== undefined, {
      timeoutMs: 30_000,
      what: 'expiry disconnect',
    });
    expect(shortLived.goodbyes).toEqual([
      expect.objectContaining({ code: 'HERALD_ERR_TOKEN_EXPIRED', reconnect: false }),
    ]);
    expect(shortLived.disconnectReason).toBe('io server disconnect');

    const leaving = await stack.start('realtime', 'rt-leaving');
    const client = stack.client(user);
    await client.connect(leaving.url);
    expect(await leaving.stop('SIGTERM')).toBe(0);
    await waitFor(() => client.disconnectReason !== undefined, { what: 'shutdown disconnect' });
    expect(client.goodbyes).toEqual([
      expect.objectContaining({ code: 'HERALD_SERVER_SHUTDOWN', reconnect: true }),
    ]);
    // The client reconnects elsewhere with its last offset and misses nothing.
    const sent = await stack.send(user, 3);
    await client.connect(b.url, client.lastOffset);
    await waitFor(() => client.received.length === 3, { what: 'after reconnecting elsewhere' });
    client.check(sent);
  });

  it('stores the job shape the gateway writes (topic, type, tenant) and exposes topic/type', async () => {
    const user = randomId('shape');
    // The job's tenant is the recipient's: only a token of tenant t1 sees it.
    const client = stack.client(user, { tenantId: 't1' });
    await client.connect(b.url);
    const job = notificationJob(user, { hello: 1 }, { topic: 'billing', type: 'invoice', tenantId: 't1' });
    await stack.queueOf(user, 't1').add('notify', job, { jobId: job.id });
    await waitFor(() => client.received.length === 1, { what: 'the notification' });
    expect(client.received[0]).toEqual({
      id: job.id,
      userId: user,
      payload: { hello: 1 },
      createdAt: job.createdAt,
      topic: 'billing',
      type: 'invoice',
      offset: expect.stringMatching(/-1$/),
    });
  });
});
