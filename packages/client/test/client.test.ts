import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { monitorRedis, parseClusterNodes, redisEnv, redisUrl, waitFor } from '@herald/testing';
import { Server } from 'socket.io';
import { describe, expect, it } from 'vitest';
import { createHeraldClient, HeraldError, HeraldUnauthorizedError } from '../src/index.js';
import { createHeraldServer } from '../src/server.js';
import { itemIds, live, once, type Recorded, record } from './support/recorder.js';
import { API_KEY, appended, connections, notify, perTest, randomId } from './support/stack.js';

describe('createHeraldClient against real realtime servers, worker, gateway and Redis', () => {
  const each = perTest();
  async function startStack(extra: Record<string, string> = {}) {
    const started = await each.start(['gateway', 'rt-a', 'rt-b', 'worker'], extra);
    return { stack: started.stack, gateway: started.gateway, a: started['rt-a'], b: started['rt-b'] };
  }
  const client = (options: Parameters<typeof record>[0]): Recorded =>
    each.track(record({ tabs: false, ...options }));
  /** A notification of Herald's shape for the stand-in servers below to send: offset 1-2, count 1 at version 2. */
  const wellFormed = () => ({
    id: 'n-2',
    offset: '1-2',
    userId: 'dana',
    payload: {},
    createdAt: new Date().toISOString(),
    unread: { count: 1, version: 2 },
  });

  it('loads the inbox, counts exactly, then resumes after a server-side cut on another instance: each once, in order', async () => {
    const { stack, gateway, a, b } = await startStack();
    const user = randomId('alice');
    const before = await notify(gateway, user, 3);
    await appended(gateway, user, before.at(-1));
    // Instances in turn, as a load balancer would: the first connection lands on rt-a.
    const urls = [a.url, b.url];
    let turn = 0;
    const alice = client({
      url: () => urls[turn++ % 2] as string,
      getToken: () => stack.token(user),
    });
    await live(alice);
    await waitFor(() => itemIds(alice).length === 3, { what: 'snapshot' });
    expect(itemIds(alice)).toEqual(before);
    expect(alice.client.getState().unread?.count).toBe(3);
    expect(alice.resumes[0]).toEqual({
      recovered: false,
      wasRecovering: false,
      replayed: 0,
      resynced: false,
    });

    const live1 = await notify(gateway, user, 2, 3);
    await waitFor(() => itemIds(alice).length === 5, { what: 'live ones' });
    expect(alice.toasts).toEqual(live1);

    // Cut: rt-a dies without a goodbye; five more are sent while the client is away.
    await a.stop('SIGKILL');
    const whileAway = notify(gateway, user, 5, 5);
    await waitFor(() => alice.resumes.length === 2, { timeoutMs: 30_000, what: 'resumed on rt-b' });
    const away = await whileAway;
    await waitFor(() => itemIds(alice).length === 10, { what: 'all ten' });
    expect(itemIds(alice)).toEqual([...before, ...live1, ...away]);
    expect(once(alice.notifications)).toBe(true);
    expect(alice.notifications).toEqual([...live1, ...away]);
    const resume = alice.resumes[1];
    expect(resume?.recovered).toBe(true);
    expect(resume?.wasRecovering).toBe(true);
    expect(alice.connections).toContain('reconnecting');
    await waitFor(() => alice.client.getState().unread?.count === 10, { what: 'count 10' });
    expect(await connections(b)).toBe(1);
  });

  it('loads the newest maxItems of a long inbox in one page read backwards, not the whole inbox', async () => {
    const { stack, gateway, a } = await startStack();
    const user = randomId('carol');
    const ids = await notify(gateway, user, 30);
    await appended(gateway, user, ids.at(-1));
    // What Redis reads of the user's inbox stream meanwhile (scripts' own commands included): on a
    // Cluster, what every node reads.
    const cluster = redisEnv().HERALD_REDIS_CLUSTER_NODES;
    const monitors = await Promise.all(
      cluster ? parseClusterNodes(cluster).map((node) => monitorRedis(node)) : [monitorRedis(redisUrl())],
    );
    const reads: string[][] = [];
    for (const monitor of monitors) {
      monitor.onCommand((args) => {
        const [command = ''] = args;
        if (/^x(rev)?range$/i.test(command) && args[1]?.includes(user)) reads.push(args);
      });
    }
    try {
      const carol = client({ url: a.url, getToken: () => stack.token(user), maxItems: 5 });
      await live(carol);
      await waitFor(() => itemIds(carol).length === 5, { what: 'snapshot' });
      expect(itemIds(carol)).toEqual(ids.slice(-5));
      expect(carol.client.getState().unread?.count).toBe(30);
      await waitFor(() => reads.some(([command]) => command?.toLowerCase() === 'xrevrange'), {
        what: 'the read',
      });
      // One backward read of 5 (and the newest offset: COUNT 1); never a forward read of the inbox.
      const counts = reads.map((args) => `${args[0]?.toLowerCase()} ${args.at(-1)}`);
      expect(counts.filter((read) => read !== 'xrevrange 1')).toEqual(['xrevrange 5']);
    } finally {
      for (const monitor of monitors) monitor.close();
    }
  });

  it('a maxItems that is no whole number ≥ 1 is refused by name at once, not a snapshot error about a "limit" never given', () => {
    // It connected, then every first load failed on `error` with "limit must be an integer from 1 to
    // 1000" (the listing's limit, derived from maxItems), and the inbox stayed empty.
    for (const maxItems of [0, -1, 1.5, Number.NaN]) {
      let error: unknown;
      try {
        createHeraldClient({
          url: 'http://127.0.0.1:9',
          getToken: () => 'never',
          tabs: false,
          maxItems,
        }).close();
      } catch (thrown) {
        error = thrown;
      }
      expect(error).toBeInstanceOf(HeraldError);
      expect(error).toMatchObject({ code: 'HERALD_ERR_VALIDATION' });
      expect((error as Error).message).toMatch(`maxItems must be an integer >= 1, not ${maxItems}`);
    }
  });

  it('a command answered with no reply of Herald’s shape rejects with HERALD_ERR_BAD_RESPONSE naming it, and a notification with no offset is dropped, not thrown', async () => {
    // A realtime stand-in over real HTTP and Socket.IO (a proxy or a server of another version): the
    // handshake as Herald's, then `list` answered null and `read` a string.
    const http = createServer();
    const io = new Server(http);
    io.on('connection', (socket) => {
      socket.emit('synced', { lastOffset: '1-1', replayed: 0, unread: { count: 0, version: 1 } });
      // A notification with no offset (it threw a TypeError in Socket.IO's handler, uncaught: the end
      // of a Node process), then one of Herald's shape, which must still arrive.
      socket.emit('notification', { id: 'no-offset', payload: {} });
      socket.emit('notification', wellFormed());
      socket.on('list', (_args: unknown, reply: (answer: unknown) => void) => reply(null));
      socket.on('read', (_args: unknown, reply: (answer: unknown) => void) => reply('garbage'));
    });
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
      const errors: unknown[] = [];
      const dana = client({ url, getToken: () => 'stand-in.token.x' });
      dana.client.on('error', (error) => errors.push(error));
      await live(dana);
      await waitFor(() => itemIds(dana).length > 0, { what: 'the well-formed notification' });
      expect(itemIds(dana)).toEqual(['n-2']);
      // It rejected with TypeError "Cannot read properties of null (reading 'ok')", and markRead with
      // a HeraldError whose code was undefined and message empty.
      for (const [call, op] of [
        [() => dana.client.list({ limit: 5 }), 'list'],
        [() => dana.client.markRead(['n-1']), 'read'],
      ] as const) {
        const error = await call().catch((e: unknown) => e);
        expect(error).toBeInstanceOf(HeraldError);
        expect(error).toMatchObject({ code: 'HERALD_ERR_BAD_RESPONSE' });
        expect((error as Error).message).toContain(op);
      }
      // The first load's listing too, on `error`.
      await waitFor(() => errors.length > 0, { what: 'the first load’s error' });
      expect(errors[0]).toMatchObject({ code: 'HERALD_ERR_BAD_RESPONSE' });
    } finally {
      io.close();
      http.close();
    }
  });

  it('fills a gap on the stream page after page while the server says there is more (pages cut by size)', async () => {
    // A realtime stand-in over real HTTP and Socket.IO: notifications 1 and 5 live, 2 to 4 missed; the
    // inbox answers the gap in two pages (as it cuts one at about 1 MiB).
    const event = (seq: number) => ({ ...wellFormed(), id: `n-${seq}`, offset: `1-${seq}` });
    const lists: unknown[] = [];
    const http = createServer();
    const io = new Server(http);
    io.on('connection', (socket) => {
      socket.on('list', (args: { after?: string; newest?: boolean }, reply: (answer: unknown) => void) => {
        lists.push(args);
        const unread = { count: 0, version: 1 };
        if (args.newest) return reply({ ok: true, items: [], unread, nextBefore: null, nextAfter: null });
        if (args.after === '1-1')
          return reply({ ok: true, items: [event(2), event(3)], unread, nextAfter: '1-3', trimmed: false });
        reply({ ok: true, items: [event(4)], unread, nextAfter: null, trimmed: false });
      });
      socket.emit('synced', { lastOffset: '0-0', replayed: 0, unread: { count: 0, version: 1 } });
      socket.emit('notification', event(1));
      setTimeout(() => socket.emit('notification', event(5)), 50);
    });
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
      const dana = client({ url, getToken: () => 'stand-in.token.x' });
      await live(dana);
      await waitFor(() => itemIds(dana).length === 5, { what: 'every notification, the gap filled' });
      expect(itemIds(dana)).toEqual(['n-1', 'n-2', 'n-3', 'n-4', 'n-5']);
      expect(lists).toEqual(expect.arrayContaining([expect.objectContaining({ after: '1-3' })]));
    } finally {
      io.close();
      http.close();
    }
  });

  it('synced, unread and resync events not of Herald’s shape are dropped or taken in part, never thrown: the client goes live, keeps a sound offset and count, and shows what follows', async () => {
    // A realtime stand-in over real HTTP and Socket.IO (a proxy or a server of another version). Each
    // of these threw a TypeError in Socket.IO's handler (uncaught: the end of a Node process), or left
    // an offset or a count that is no number in the client's state.
    const http = createServer();
    const io = new Server(http);
    io.on('connection', (socket) => {
      socket.emit('unread', null);
      socket.emit('resync', null);
      socket.emit('resync', { lastOffset: 'not-an-offset' });
      socket.emit('synced', {
        lastOffset: 'garbage',
        replayed: 'many',
        unread: { count: 'x', version: 'y' },
      });
      socket.emit('synced', null);
      socket.emit('unread', { read: 5, count: -1, version: 99 });
      socket.emit('notification', wellFormed());
      socket.on('list', (_args: unknown, reply: (answer: unknown) => void) =>
        reply({ ok: true, items: [], unread: { count: 0, version: 1 }, nextBefore: null }),
      );
    });
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
      const dana = client({ url, getToken: () => 'stand-in.token.x' });
      await live(dana);
      await waitFor(() => itemIds(dana).includes('n-2'), { what: 'the well-formed notification' });
      const state = dana.client.getState();
      expect(state.lastOffset).toBe('1-2');
      expect(state.unread).toEqual({ count: 1, version: 2 });
      expect(dana.resumes.at(-1)?.replayed).toBe(0);
    } finally {
      io.close();
      http.close();
    }
  });

  it('a server that never answers the first load’s listing gives a HeraldError HERALD_ERR_TIMEOUT on `error`, as a command does', async () => {
    // A realtime stand-in over real HTTP and Socket.IO that syncs, then never acks `list`: a server
    // frozen after the handshake, or a proxy that drops the ack.
    const http = createServer();
    const io = new Server(http);
    io.on('connection', (socket) => {
      socket.emit('synced', { lastOffset: '1-1', replayed: 0, unread: { count: 1, version: 1 } });
      socket.on('list', () => {});
    });
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
      const errors: unknown[] = [];
      const erin = client({ url, getToken: () => 'stand-in.token.x', timeoutMs: 300 });
      erin.client.on('error', (error) => errors.push(error));
      await live(erin);
      // It was Socket.IO's own Error "operation has timed out", with no code.
      await waitFor(() => errors.length > 0, { what: 'the first load’s error' });
      expect(errors[0]).toBeInstanceOf(HeraldError);
      expect(errors[0]).toMatchObject({ code: 'HERALD_ERR_TIMEOUT' });
      expect((errors[0] as Error).message).toContain('list');
      const error = await erin.client.list({ limit: 5 }).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'HERALD_ERR_TIMEOUT' });
    } finally {
      io.close();
      http.close();
    }
  });

  it('marks read idempotently; the count is always the server’s; list pages by offset', async () => {
    const { stack, gateway, a } = await startStack();
    const user = randomId('bob');
    const ids = await notify(gateway, user, 4);
    await appended(gateway, user, ids.at(-1));
    const bob = client({ url: a.url, getToken: () => stack.token(user) });
    await live(bob);
    await waitFor(() => itemIds(bob).length === 4, { what: 'snapshot' });

    expect(await bob.client.markRead([ids[0] as string])).toMatchObject({ changed: 1, unread: { count: 3 } });
    expect(await bob.client.markRead([ids[0] as string])).toMatchObject({ changed: 0 });
    expect(bob.client.getState().unread?.count).toBe(3);
    expect(bob.client.getState().items[0]?.read).toBe(true);

    const first = await bob.client.list({ limit: 2 });
    expect(first.items.map((item) => item.id)).toEqual(ids.slice(0, 2));
    expect(first.items[0]?.read).toBe(true);
    const second = await bob.client.list({ after: first.nextAfter as string, limit: 2 });
    expect(second.items.map((item) => item.id)).toEqual(ids.slice(2));

    // Acks of what was shown, batched: the gateway then reports them delivered.
    const api = createHeraldServer({ url: gateway.url, apiKey: API_KEY });
    expect((await api.status(ids[3] as string))?.status).toBe('queued');
    bob.client.shown(ids.slice(2));
    bob.client.shown(ids.slice(2)); // again: nothing more is sent
    await waitFor(async () => (await api.status(ids[3] as string))?.status === 'delivered', {
      what: 'delivered',
    });
    expect((await api.status(ids[2] as string))?.status).toBe('delivered');
    expect((await api.status(ids[1] as string))?.status).toBe('queued');

    // Another device of bob marks all read: this client's count follows (version-stamped), and so do
    // its items' read marks (they used to stay unread under a badge of 0 until a reload).
    const other = client({ url: a.url, getToken: () => stack.token(user) });
    await live(other);
    await waitFor(() => itemIds(other).length === 4, { what: 'the other device’s snapshot' });
    await other.client.markRead([ids[1] as string]);
    await waitFor(() => bob.client.getState().items[1]?.read === true, {
      what: 'a read on the other device',
    });
    expect(bob.client.getState().items.map((item) => item.read)).toEqual([true, true, false, false]);
    await other.client.markAllRead();
    await waitFor(() => bob.client.getState().unread?.count === 0, { what: 'count 0 from the other device' });
    await waitFor(() => bob.client.getState().items.every((item) => item.read), { what: 'every item read' });
    // The same from the backend (REST, API key).
    await notify(gateway, user, 1, 4);
    await waitFor(() => itemIds(bob).length === 5, { what: 'a fifth' });
    await api.inbox.markRead(user, { all: true });
    await waitFor(() => bob.client.getState().items.every((item) => item.read), { what: 'read over REST' });
  });

  it('refreshes short-lived tokens before they expire, without a gap or a duplicate', async () => {
    const { stack, gateway, a } = await startStack();
    const user = randomId('carol');
    // 8 s tokens: each is replaced 5 s before its exp (refreshDelay), by a new socket made before
    // the old one is closed.
    const carol = client({ url: a.url, getToken: () => stack.token(user, 8) });
    await live(carol);
    const sent: string[] = [];
    await waitFor(
      async () => {
        sent.push(...(await notify(gateway, user, 1, sent.length)));
        return carol.tokens >= 4;
      },
      { timeoutMs: 40_000, intervalMs: 300, what: 'three refreshes' },
    );
    sent.push(...(await notify(gateway, user, 1, sent.length)));
    await waitFor(() => itemIds(carol).length === sent.length, { what: 'every notification' });
    expect(itemIds(carol)).toEqual(sent);
    expect(once(carol.notifications)).toBe(true);
    expect(carol.notifications).toEqual(sent);
    // Never cut: the server's expiry (goodbye HERALD_ERR_TOKEN_EXPIRED) never came.
    expect(carol.client.getState().error).toBeUndefined();
    expect(carol.connections.filter((state) => state !== 'live')).toEqual([]);
  });

  it('resync: an offset trimmed away reloads the snapshot, then continues from its offset', async () => {
    const { stack, gateway, a } = await startStack({ HERALD_INBOX_MAX_LENGTH: '5' });
    const user = randomId('dave');
    await notify(gateway, user, 2);
    const first = client({ url: a.url, getToken: () => stack.token(user) });
    await live(first);
    await waitFor(() => itemIds(first).length === 2, { what: 'snapshot' });
    const saved = first.client.getState().lastOffset;
    first.client.close();

    const later = await notify(gateway, user, 12, 2);
    await appended(gateway, user, later.at(-1));
    // Saved offset (e.g. sessionStorage) from before: 12 more came meanwhile and the inbox keeps 5.
    const again = client({
      url: a.url,
      getToken: () => stack.token(user),
      ...(saved ? { lastOffset: saved } : {}),
    });
    await live(again);
    await waitFor(() => itemIds(again).length === 5, { what: 'the 5 kept' });
    expect(itemIds(again)).toEqual(later.slice(-5));
    expect(again.resumes.at(-1)).toMatchObject({ recovered: false, wasRecovering: true, resynced: true });
    const next = await notify(gateway, user, 1, 14);
    await waitFor(() => itemIds(again).at(-1) === next[0], { what: 'live after the resync' });
    expect(once(again.notifications)).toBe(true);

    // resync() on demand: same items, read marks from the server.
    await again.client.markAllRead();
    await again.client.resync();
    expect(itemIds(again)).toEqual([...later.slice(-4), ...next]);
    expect(again.client.getState().items.every((item) => item.read)).toBe(true);
  });

  it('markAllRead() marks what the client has seen: one stored meanwhile, still on its way, stays unread', async () => {
    const { stack, gateway, a } = await startStack();
    const user = randomId('hana');
    const seen = await notify(gateway, user, 2);
    const hana = client({ url: a.url, getToken: () => stack.token(user) });
    await live(hana);
    await waitFor(() => itemIds(hana).length === 2, { what: 'the two' });
    // A worker stored one more; its live event has not reached this socket yet (the same moment as a
    // click on "Mark all read" while it travels): appended to the inbox, not published.
    const appended = await stack.inbox.append({
      id: randomId('travelling'),
      userId: user,
      payload: { title: 'not seen yet' },
      createdAt: new Date().toISOString(),
    });
    expect(appended.outcome).toBe('appended');
    const result = await hana.client.markAllRead();
    expect(result).toMatchObject({ changed: 2, unread: { count: 1 } });
    expect(hana.client.getState().unread?.count).toBe(1);
    expect(seen.every((id) => hana.client.getState().items.find((item) => item.id === id)?.read)).toBe(true);
  });

  it('a saved lastOffset that is no offset (corrupted storage, 16 digits) is left out, not refused forever', async () => {
    const { stack, gateway, a } = await startStack();
    const user = randomId('gina');
    const sent = await notify(gateway, user, 2);
    await appended(gateway, user, sent.at(-1));
    // Each used to be sent on every handshake, refused (HERALD_ERR_OFFSET_INVALID) and retried for good.
    for (const lastOffset of ['[object Object]', '1234567890123456-1']) {
      const gina = client({
        url: a.url,
        backoff: { minMs: 10, maxMs: 20 },
        getToken: () => stack.token(user),
        lastOffset,
      });
      await live(gina);
      await waitFor(() => itemIds(gina).length === 2, { what: 'the inbox loaded' });
      expect(itemIds(gina)).toEqual(sent);
      gina.client.close();
    }
  });

  it('getToken throwing HeraldUnauthorizedError stops retrying: unauthorized until reconnect()', async () => {
    const { stack, a } = await startStack();
    const user = randomId('erin');
    let allowed = false;
    const erin = client({
      url: a.url,
      backoff: { minMs: 10, maxMs: 20 },
      getToken: () => {
        if (!allowed) throw new HeraldUnauthorizedError('signed out');
        return stack.token(user);
      },
    });
    await waitFor(() => erin.client.getState().connection === 'unauthorized', { what: 'unauthorized' });
    // With 10 ms backoff, any retry would have called getToken many times by the time another client is live.
    const other = client({ url: a.url, getToken: () => stack.token(randomId('frank')) });
    await live(other);
    expect(erin.tokens).toBe(1);
    allowed = true;
    erin.client.reconnect();
    await live(erin);
    expect(erin.tokens).toBe(2);
  });

  it('shows why it is not live yet: a refused token, a server out of reach and a failing getToken() reach getState() and the subscribers while it retries', async () => {
    const { a } = await startStack();
    // A free port, closed again: nothing listens there.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise((resolve) => closed.close(resolve));
    const cases = [
      { url: a.url, getToken: () => 'not-a-token', code: /^HERALD_ERR_TOKEN/ },
      { url: `http://127.0.0.1:${port}`, getToken: () => 'not-a-token', code: /^HERALD_ERR_CONNECT$/ },
      {
        url: a.url,
        getToken: () => Promise.reject(new Error('the backend answered 401')),
        code: /^HERALD_ERR_TOKEN_UNAVAILABLE$/,
      },
    ];
    for (const { url, getToken, code } of cases) {
      const stuck = client({ url, getToken, backoff: { minMs: 10, maxMs: 50 } });
      const seen: string[] = [];
      stuck.client.subscribe((state) => {
        if (state.error) seen.push(state.error.code);
      });
      await waitFor(() => code.test(stuck.client.getState().error?.code ?? ''), {
        what: `getState().error ${code} (${url})`,
      });
      expect(stuck.client.getState().connection).toBe('connecting');
      expect(seen.some((seenCode) => code.test(seenCode))).toBe(true);
      expect(stuck.client.getState().error?.message).toBeTruthy();
    }
  });

  it('a refused token is replaced: the server’s HERALD_ERR_TOKEN_EXPIRED leads to a new getToken()', async () => {
    const { stack, a } = await startStack();
    const user = randomId('gina');
    let calls = 0;
    const gina = client({
      url: a.url,
      backoff: { minMs: 10, maxMs: 50 },
      // The first token is already expired (a clock or a cache gone wrong).
      getToken: () => (calls++ === 0 ? stack.token(user, -10) : stack.token(user)),
    });
    await live(gina);
    expect(calls).toBe(2);
  });

  it('the watchdog kills a socket whose server stopped pinging (frozen process), and resumes elsewhere', async () => {
    const { stack, gateway, a, b } = await startStack({
      HERALD_PING_INTERVAL_MS: '1000',
      HERALD_PING_TIMEOUT_MS: '1000',
    });
    const user = randomId('hana');
    const urls = [a.url, b.url];
    let turn = 0;
    const hana = client({
      url: () => urls[turn++ % 2] as string,
      getToken: () => stack.token(user),
      watchdogSlackMs: 500,
    });
    await live(hana);
    // The process stops (SIGSTOP): its TCP connections stay open and say nothing, like a sleep/wake zombie.
    process.kill(a.process.pid as number, 'SIGSTOP');
    try {
      const sent = notify(gateway, user, 3);
      await waitFor(() => hana.resumes.length === 2, { timeoutMs: 30_000, what: 'resumed on rt-b' });
      const ids = await sent;
      await waitFor(() => itemIds(hana).length === 3, { what: 'the three' });
      expect(itemIds(hana)).toEqual(ids);
      expect(hana.resumes[1]?.recovered).toBe(true);
    } finally {
      process.kill(a.process.pid as number, 'SIGCONT');
    }
  });
});
