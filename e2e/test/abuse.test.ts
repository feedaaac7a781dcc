import { type CommandReply, signUserToken } from '@herald/protocol';
import type { AppProcess } from '@herald/testing';
import { redisUrl } from '@herald/testing';
import { io, type Socket } from 'socket.io-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RawClient } from './support/raw-client.js';
import { randomId, SECRET, Stack, waitFor } from './support/stack.js';

const SOCKET_BURST = 5;
const USER_BURST = 8;
const REFUSED_BURST = 3;
// Refill so slow (one per 100 s) that nothing comes back while a test runs.
const SLOW = '0.01';

interface Handshake {
  socket: Socket;
  code?: string | undefined;
  retryAfterMs?: number | undefined;
}

// Two realtime processes sharing one Redis: `proxied` trusts X-Forwarded-For from loopback, `direct`
// does not (the default).
describe('abuse limits: events per socket and per user, refused handshakes per client address', () => {
  let stack: Stack;
  let proxied: AppProcess;
  let direct: AppProcess;
  const sockets: Socket[] = [];

  beforeAll(async () => {
    stack = new Stack(redisUrl(), {
      HERALD_RATE_LIMIT_PREFIX: `${randomId('rl')}:`,
      HERALD_SOCKET_EVENTS_BURST: String(SOCKET_BURST),
      HERALD_SOCKET_EVENTS_PER_SECOND: SLOW,
      HERALD_USER_EVENTS_BURST: String(USER_BURST),
      HERALD_USER_EVENTS_PER_SECOND: SLOW,
      HERALD_REFUSED_HANDSHAKES_BURST: String(REFUSED_BURST),
      HERALD_REFUSED_HANDSHAKES_PER_SECOND: SLOW,
    });
    [proxied, direct] = await Promise.all([
      stack.start('realtime', 'rt-proxied', { HERALD_TRUST_PROXY: 'loopback' }),
      stack.start('realtime', 'rt-direct'),
    ]);
  });
  afterAll(async () => {
    for (const socket of sockets) socket.disconnect();
    await stack.dispose();
  });

  async function tokenFor(userId: string): Promise<string> {
    return (
      await signUserToken({
        tenantId: 'default',
        keyId: 'test-key',
        userId,
        secret: SECRET,
        ttlSeconds: 3600,
      })
    ).token;
  }

  /** One handshake with socket.io-client: connected, or the `connect_error`'s code and retry time. */
  function handshake(url: string, auth: Record<string, unknown>, forwardedFor?: string): Promise<Handshake> {
    const socket = io(url, {
      auth,
      transports: ['websocket'],
      reconnection: false,
      forceNew: true,
      ...(forwardedFor ? { extraHeaders: { 'x-forwarded-for': forwardedFor } } : {}),
    });
    sockets.push(socket);
    return new Promise((resolve) => {
      socket.once('connect', () => resolve({ socket }));
      socket.once('connect_error', (error: Error & { data?: { code?: string; retryAfterMs?: number } }) =>
        resolve({ socket, code: error.data?.code, retryAfterMs: error.data?.retryAfterMs }),
      );
    });
  }

  async function connected(url: string, userId: string): Promise<Socket> {
    const result = await handshake(url, { token: await tokenFor(userId) });
    expect(result.code).toBeUndefined();
    return result.socket;
  }

  /** A new user whose inbox holds one unread notification. */
  async function userWithOneUnread(prefix: string): Promise<string> {
    const user = randomId(prefix);
    await stack.inbox.append({
      id: randomId('n'),
      userId: user,
      payload: {},
      createdAt: new Date().toISOString(),
    });
    return user;
  }

  async function acks(socket: Socket, count: number): Promise<CommandReply[]> {
    const replies: CommandReply[] = [];
    for (let n = 0; n < count; n++)
      replies.push(await socket.timeout(10_000).emitWithAck('ack', { ids: [] }));
    return replies;
  }

  it('events: over the socket’s burst, then over the user’s (on another instance): HERALD_ERR_RATE_LIMITED with retryAfterMs', async () => {
    const user = randomId('flood');
    const first = await connected(proxied.url, user);
    const overSocket = await acks(first, SOCKET_BURST + 2);
    expect(overSocket.slice(0, SOCKET_BURST).every((reply) => reply.ok)).toBe(true);
    for (const reply of overSocket.slice(SOCKET_BURST)) {
      expect(reply).toMatchObject({ ok: false, code: 'HERALD_ERR_RATE_LIMITED' });
      expect(reply.ok === false && reply.error).toMatch(/this connection/);
      expect(reply.ok === false && reply.retryAfterMs).toBeGreaterThan(0);
    }

    // The same user on the other instance: the user's bucket is shared (Redis); denied calls took nothing.
    const second = await connected(direct.url, user);
    const overUser = await acks(second, USER_BURST - SOCKET_BURST + 2);
    expect(overUser.slice(0, USER_BURST - SOCKET_BURST).every((reply) => reply.ok)).toBe(true);
    for (const reply of overUser.slice(USER_BURST - SOCKET_BURST)) {
      expect(reply).toMatchObject({ ok: false, code: 'HERALD_ERR_RATE_LIMITED' });
      expect(reply.ok === false && reply.error).toMatch(/this user/);
    }
    // read and read-all are limited too.
    expect(await second.timeout(10_000).emitWithAck('read', { ids: [] })).toMatchObject({
      code: 'HERALD_ERR_RATE_LIMITED',
    });
    expect(await second.timeout(10_000).emitWithAck('read-all', {})).toMatchObject({
      code: 'HERALD_ERR_RATE_LIMITED',
    });

    // Another user, on either instance, is not affected.
    const other = await connected(direct.url, randomId('calm'));
    expect((await acks(other, SOCKET_BURST)).every((reply) => reply.ok)).toBe(true);
  });

  it('a list costs one event per 50 items it asks for: a page of 1,000 is not one event', async () => {
    const socket = await connected(proxied.url, randomId('lister'));
    const list = (body: unknown) => socket.timeout(10_000).emitWithAck('list', body) as Promise<CommandReply>;
    // The socket's burst is 5: 200 items cost 4, then 100 (2) is over, 50 (1) is not.
    expect(await list({ limit: 200 })).toMatchObject({ ok: true });
    expect(await list({ limit: 100 })).toMatchObject({ ok: false, code: 'HERALD_ERR_RATE_LIMITED' });
    expect(await list({ limit: 50 })).toMatchObject({ ok: true });
    expect(await list({})).toMatchObject({ ok: false, code: 'HERALD_ERR_RATE_LIMITED' });
    // Dearer than the whole burst (1,000 items: 20): it costs the burst, so it passes on a fresh socket.
    const fresh = await connected(proxied.url, randomId('lister'));
    expect(await fresh.timeout(10_000).emitWithAck('list', { limit: 1000 })).toMatchObject({ ok: true });
    expect(await fresh.timeout(10_000).emitWithAck('ack', { ids: [] })).toMatchObject({
      code: 'HERALD_ERR_RATE_LIMITED',
    });
  });

  it('commands sent with only an acknowledgement callback are acknowledged', async () => {
    const socket = await connected(proxied.url, randomId('nobody'));
    // socket.emit('read-all', ack): the callback arrives where the body would be.
    expect(await socket.timeout(10_000).emitWithAck('read-all')).toMatchObject({ ok: true, changed: 0 });
    expect(await socket.timeout(10_000).emitWithAck('ack')).toMatchObject({
      ok: false,
      code: 'HERALD_ERR_INBOX_INVALID_ARGUMENT',
    });
    // And from a raw client: EVENT ["read-all"] with an ack id and no body.
    const raw = new RawClient(proxied.url);
    await raw.opened();
    await raw.connect({ token: await tokenFor(randomId('raw')) });
    await waitFor(() => raw.frames.some((frame) => frame.startsWith('40{"sid"')), { what: 'connected' });
    await raw.send('427["read-all"]');
    const answer = await waitFor(() => raw.frames.find((frame) => frame.startsWith('437')), {
      what: 'read-all acknowledged',
    });
    expect(JSON.parse(answer.slice(3))).toMatchObject([{ ok: true, changed: 0 }]);
    raw.drop();
  });

  it('an unknown event is answered with an error naming it; a read-all body that is no object marks nothing', async () => {
    const user = await userWithOneUnread('typo');
    const socket = await connected(direct.url, user);
    // A typo used to get no answer at all: the caller waited out its own timeout.
    expect(await socket.timeout(10_000).emitWithAck('mark-read', { ids: ['x'] })).toEqual({
      ok: false,
      code: 'HERALD_ERR_BAD_REQUEST',
      error: expect.stringMatching(
        /^Unknown event "mark-read": the events a client sends are (?!.*disconnect).*\bread-all\b/,
      ),
    });
    // `read` meant, `read-all` sent: it used to mark the whole inbox read.
    for (const body of [['an-id'], 'all'])
      expect(await socket.timeout(10_000).emitWithAck('read-all', body)).toMatchObject({
        ok: false,
        code: 'HERALD_ERR_INBOX_INVALID_ARGUMENT',
      });
    expect((await stack.inbox.unread(user)).count).toBe(1);
  });

  it('a read-all body with another key than upTo (ids: a read; a typo of upTo), or binary, marks nothing; read and ack take ids alone', async () => {
    // Each on a socket of its own user: the socket and user bursts here are 5 and 8.
    const attempt = async (event: string, body: unknown) => {
      const user = await userWithOneUnread('keys');
      const socket = await connected(direct.url, user);
      const answer = await socket.timeout(10_000).emitWithAck(event, body);
      expect((await stack.inbox.unread(user)).count, `${event} ${JSON.stringify(body)}`).toBe(1);
      return answer;
    };
    // Each of these used to mark the whole inbox read.
    expect(await attempt('read-all', { ids: ['an-id'] })).toMatchObject({
      ok: false,
      code: 'HERALD_ERR_INBOX_INVALID_ARGUMENT',
      error: expect.stringContaining('"ids"'),
    });
    expect(await attempt('read-all', { uptTo: '1-1' })).toMatchObject({
      ok: false,
      code: 'HERALD_ERR_INBOX_INVALID_ARGUMENT',
      error: expect.stringContaining('"uptTo"'),
    });
    expect(await attempt('read-all', Buffer.from('x'))).toMatchObject({
      ok: false,
      code: 'HERALD_ERR_INBOX_INVALID_ARGUMENT',
    });
    for (const event of ['read', 'ack'])
      expect(await attempt(event, { ids: [], upTo: '1-1' })).toMatchObject({
        ok: false,
        code: 'HERALD_ERR_INBOX_INVALID_ARGUMENT',
        error: expect.stringContaining('"upTo"'),
      });
  });

  it('a command with more than a body before its callback, and an event named "error", are answered, not left waiting', async () => {
    const socket = await connected(direct.url, randomId('extra'));
    for (const [event, ...args] of [
      ['ack', { ids: ['x'] }, { more: 1 }],
      ['list', {}, {}],
      ['read-all', undefined, 'all'],
    ] as const) {
      expect(await socket.timeout(10_000).emitWithAck(event, ...(args as [unknown, unknown]))).toEqual({
        ok: false,
        code: 'HERALD_ERR_BAD_REQUEST',
        error: expect.stringContaining(`"${event}" takes one body`),
      });
    }
    // Socket.IO's "error" is no event of Herald's: unknown, as a typo is.
    expect(await socket.timeout(10_000).emitWithAck('error', {})).toEqual({
      ok: false,
      code: 'HERALD_ERR_BAD_REQUEST',
      error: expect.stringMatching(/^Unknown event "error"/),
    });
    // And the socket goes on.
    expect(await socket.timeout(10_000).emitWithAck('read-all')).toMatchObject({ ok: true });
  });

  it('refused handshakes per client address behind a trusted proxy (X-Forwarded-For)', async () => {
    const attacker = '203.0.113.7';
    for (let n = 0; n < REFUSED_BURST; n++) {
      expect(await handshake(proxied.url, { token: 'forged' }, attacker)).toMatchObject({
        code: 'HERALD_ERR_TOKEN_INVALID',
      });
    }
    const over = await handshake(proxied.url, {}, attacker);
    expect(over.code).toBe('HERALD_ERR_RATE_LIMITED');
    expect(over.retryAfterMs).toBeGreaterThan(0);
    // While over the limit, that address is refused before its token is checked, valid or not.
    const valid = await tokenFor(randomId('nat'));
    expect((await handshake(proxied.url, { token: valid }, attacker)).code).toBe('HERALD_ERR_RATE_LIMITED');
    // Another address (and the proxy itself) is not affected.
    expect((await handshake(proxied.url, { token: valid }, '203.0.113.8')).code).toBeUndefined();
    expect((await handshake(proxied.url, { token: 'forged' }, '203.0.113.8')).code).toBe(
      'HERALD_ERR_TOKEN_INVALID',
    );
  });

  // Last: it uses up the loopback address's budget on the shared Redis.
  it('without a trusted proxy, X-Forwarded-For is ignored: a forged one does not escape the limit', async () => {
    for (let n = 0; n < REFUSED_BURST; n++) {
      expect(await handshake(direct.url, { token: 'forged' }, `198.51.100.${n}`)).toMatchObject({
        code: 'HERALD_ERR_TOKEN_INVALID',
      });
    }
    expect((await handshake(direct.url, { token: 'forged' }, '198.51.100.99')).code).toBe(
      'HERALD_ERR_RATE_LIMITED',
    );
  });
});
