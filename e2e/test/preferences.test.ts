import type { PreferencesReply, TopicsReply } from '@herald/protocol';
import { type AppProcess, redisUrl } from '@herald/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { API_KEY, gatewayCall, randomId, Stack, type TestClient, TRIO, waitFor } from './support/stack.js';

describe('mutes and self-service topics (gateway, worker, realtime processes, real sockets)', () => {
  const stack = new Stack(redisUrl());
  let gateway: AppProcess;
  let realtime: AppProcess;

  beforeAll(async () => {
    [gateway, realtime] = await Promise.all([
      stack.start(TRIO.gateway, 'gateway'),
      stack.start(TRIO.realtime, 'realtime'),
      stack.start(TRIO.worker, 'worker'),
    ]);
  });
  afterAll(() => stack.dispose());

  const call = async (method: string, path: string, body?: unknown) =>
    gatewayCall(gateway.url, API_KEY, method, path, body === undefined ? {} : { body });

  async function send(body: Record<string, unknown>): Promise<string> {
    const answer = await call('POST', '/notify', { payload: {}, ...body });
    expect(answer.status, JSON.stringify(answer.body)).toBe(202);
    return answer.body.id as string;
  }

  /** Waits until notification `id` is no longer `queued` (muted, or a fan-out sent), and answers its status. */
  async function settled(id: string): Promise<Record<string, unknown>> {
    return waitFor(
      async () => {
        const { body } = await call('GET', `/notifications/${id}`);
        return body.status === 'queued' ? undefined : body;
      },
      { what: `${id} settled` },
    );
  }

  async function connected(userId: string, lastOffset?: string, tenantId?: string): Promise<TestClient> {
    const client = stack.client(userId, tenantId === undefined ? {} : { tenantId });
    await client.connect(realtime.url, lastOffset);
    return client;
  }

  function emit(client: TestClient, event: 'preferences' | 'mute' | 'unmute', body: unknown) {
    const socket = client.socket;
    if (!socket) throw new Error('not connected');
    return socket.timeout(20_000).emitWithAck(event, body) as Promise<PreferencesReply>;
  }

  function emitTopics(client: TestClient, event: 'topics' | 'subscribe' | 'unsubscribe', body: unknown) {
    const socket = client.socket;
    if (!socket) throw new Error('not connected');
    return socket.timeout(20_000).emitWithAck(event, body) as Promise<TopicsReply>;
  }

  it('a user reads, mutes and unmutes their own preferences over the socket, and only their own', async () => {
    const alice = await connected(randomId('alice'));
    const bob = await connected(randomId('bob'));
    expect(await emit(alice, 'preferences', {})).toEqual({
      ok: true,
      preferences: { muted: { topics: [], types: [] } },
    });
    expect(await emit(alice, 'mute', { topics: ['promo'], types: ['digest'] })).toEqual({
      ok: true,
      changed: 2,
      preferences: { muted: { topics: ['promo'], types: ['digest'] } },
    });
    // The backend sees what the user set, and the other way round.
    expect((await call('GET', `/users/${alice.userId}/preferences`)).body).toEqual({
      userId: alice.userId,
      muted: { topics: ['promo'], types: ['digest'] },
    });
    await call('PUT', `/users/${alice.userId}/preferences/mutes`, { types: ['weekly'] });
    expect(await emit(alice, 'preferences', {})).toMatchObject({
      preferences: { muted: { types: ['digest', 'weekly'] } },
    });

    // Bob names Alice: the server acts on the token's user only, so it is Bob's own mute.
    expect(await emit(bob, 'unmute', { userId: alice.userId, topics: ['promo'] })).toMatchObject({
      ok: true,
      changed: 0,
    });
    expect(await emit(bob, 'mute', { userId: alice.userId, topics: ['bobs'] })).toMatchObject({
      preferences: { muted: { topics: ['bobs'] } },
    });
    expect(await emit(alice, 'preferences', {})).toMatchObject({
      preferences: { muted: { topics: ['promo'] } },
    });
    // Alice of another tenant is another user.
    const elsewhere = await connected(alice.userId, undefined, 'globex');
    expect(await emit(elsewhere, 'preferences', {})).toMatchObject({
      preferences: { muted: { topics: [], types: [] } },
    });

    for (const bad of [{}, { topics: [] }, { topics: ['a b'] }, { types: 'digest' }, undefined]) {
      expect(await emit(alice, 'mute', bad)).toMatchObject({
        ok: false,
        code: 'HERALD_ERR_INBOX_INVALID_ARGUMENT',
      });
    }
    // A topic that is no string, however deep: named by its kind (it was stringified into the message,
    // which overflowed the stack on deep nesting and answered "Redis unavailable").
    let nested: unknown = ['promo'];
    for (let i = 0; i < 2000; i++) nested = [nested];
    for (const topic of [nested, { name: 'promo' }, 7]) {
      expect(await emit(alice, 'mute', { topics: [topic] })).toEqual({
        ok: false,
        code: 'HERALD_ERR_INBOX_INVALID_ARGUMENT',
        error: `${Array.isArray(topic) ? 'an array' : typeof topic === 'object' ? 'an object' : 'a number'} is not a topic name: 1 to 64 of A-Z a-z 0-9 _ . : / -, not . or .. alone or between slashes`,
      });
    }
    const many = Array.from({ length: 1000 }, (_, i) => `t${i}`);
    expect(await emit(alice, 'mute', { topics: many })).toMatchObject({
      ok: false,
      code: 'HERALD_ERR_TOO_MANY_MUTES',
    });
    expect(await emit(alice, 'unmute', { topics: ['promo'] })).toEqual({
      ok: true,
      changed: 1,
      preferences: { muted: { topics: [], types: ['digest', 'weekly'] } },
    });
  });

  it('a muted topic’s notifications reach the user neither live nor on resume, while the others do; unmuted, they come again', async () => {
    const user = randomId('alice');
    const other = randomId('bob');
    const topic = randomId('promo');
    const alice = await connected(user);
    await call('PUT', `/users/${user}/preferences/mutes`, { topics: [topic] });
    await call('PUT', `/topics/${topic}/subscribers`, { userIds: [user, other] });

    // Live: a muted single send and topic send, and one of another topic.
    const mutedSingle = await send({ userId: user, topic });
    const fanout = await send({ topic });
    const kept = await send({ userId: user, topic: 'orders' });
    expect(await settled(mutedSingle)).toMatchObject({ status: 'muted', muted: { topic } });
    expect(await settled(fanout)).toMatchObject({ status: 'sent', recipients: { reached: 1, muted: 1 } });
    await waitFor(() => alice.received.some((event) => event.id === kept), { what: 'the kept one live' });
    expect((await stack.inboxIds(other)).includes(fanout)).toBe(true);

    // Offline: the resume brings what was stored meanwhile, nothing muted.
    const resumeFrom = alice.lastOffset;
    alice.disconnect();
    const mutedOffline = await send({ userId: user, topic });
    const keptOffline = await send({ userId: user });
    expect(await settled(mutedOffline)).toMatchObject({ status: 'muted' });
    await waitFor(async () => (await stack.inboxIds(user)).includes(keptOffline), { what: 'stored offline' });
    const back = await connected(user, resumeFrom);
    expect(back.received.map((event) => event.id)).toEqual([keptOffline]);
    // The whole inbox, replayed from the start: gapless, and only the unmuted ones.
    const replay = await connected(user, '0-0');
    replay.check([kept, keptOffline]);
    expect(alice.received.map((event) => event.id)).toEqual([kept]);

    // Unmuted (by the user), the topic comes live again.
    expect(await emit(replay, 'unmute', { topics: [topic] })).toMatchObject({ ok: true, changed: 1 });
    const after = await send({ userId: user, topic });
    await waitFor(() => replay.received.some((event) => event.id === after), { what: 'unmuted one live' });
    replay.check([kept, keptOffline, after]);
  });
  it('a body nested too deep to show (sent as raw frames, as a client of another language may) is refused as a topic not allowed, not as Redis unavailable', async () => {
    const token = await stack.token(randomId('deep'), 3600, ['news']);
    const ws = new WebSocket(`${realtime.url.replace(/^http/, 'ws')}/socket.io/?EIO=4&transport=websocket`);
    const frames: string[] = [];
    ws.on('message', (data) => {
      const frame = data.toString();
      if (frame === '2') ws.send('3'); // Engine.IO ping
      frames.push(frame);
    });
    try {
      await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
      ws.send(`40${JSON.stringify({ token })}`);
      await waitFor(() => frames.some((frame) => frame.startsWith('40{')), { what: 'the namespace connect' });
      let deep = '1';
      for (let i = 0; i < 20_000; i++) deep = `[${deep}]`;
      ws.send(`421["subscribe",{"topic":${deep}}]`);
      ws.send(`422["subscribe",${deep}]`);
      ws.send(`423["unsubscribe",{"topic":${deep}}]`);
      for (const id of [1, 2, 3]) {
        await waitFor(() => frames.some((frame) => frame.startsWith(`43${id}[`)), { what: `answer ${id}` });
        const answer = JSON.parse(frames.find((frame) => frame.startsWith(`43${id}[`))?.slice(3) ?? '[]')[0];
        expect(answer, `answer ${id}`).toMatchObject({ ok: false, code: 'HERALD_ERR_TOPIC_NOT_ALLOWED' });
      }
    } finally {
      ws.close();
    }
  });

  it('a user subscribes themselves to the topics their token allows, and to no other', async () => {
    const user = randomId('carol');
    const minted = await call('POST', '/tokens', { userId: user, topics: ['news', 'sports', 'news'] });
    expect(minted.status).toBe(200);
    const carol = stack.client(user);
    await carol.connect(realtime.url, undefined, { token: minted.body.token });
    const topicsEvent = (event: 'topics' | 'subscribe' | 'unsubscribe', body: unknown) =>
      emitTopics(carol, event, body);
    const subscribers = async (topic: string) =>
      (await call('GET', `/topics/${topic}/subscribers`)).body.userIds as string[];

    expect(await topicsEvent('topics', {})).toEqual({
      ok: true,
      topics: [
        { topic: 'news', subscribed: false },
        { topic: 'sports', subscribed: false },
      ],
    });
    expect(await topicsEvent('subscribe', { topic: 'news' })).toEqual({
      ok: true,
      topics: [
        { topic: 'news', subscribed: true },
        { topic: 'sports', subscribed: false },
      ],
    });
    expect(await subscribers('news')).toContain(user);
    const fanout = await send({ topic: 'news' });
    await waitFor(() => carol.received.some((event) => event.id === fanout), { what: 'the topic send live' });

    for (const body of [{ topic: 'secret' }, { topic: 'a b' }, {}, undefined]) {
      expect(await topicsEvent('subscribe', body)).toMatchObject({
        ok: false,
        code: 'HERALD_ERR_TOPIC_NOT_ALLOWED',
      });
    }
    // The topic sent bare, not as { topic }: told so, not that "undefined" is not allowed.
    expect(await topicsEvent('subscribe', 'news')).toMatchObject({
      ok: false,
      code: 'HERALD_ERR_TOPIC_NOT_ALLOWED',
      error: expect.stringMatching(/takes \{ topic \}.*not "news"/),
    });
    expect(await subscribers('secret')).not.toContain(user);
    expect(await topicsEvent('unsubscribe', { topic: 'news' })).toMatchObject({
      ok: true,
      topics: [
        { topic: 'news', subscribed: false },
        { topic: 'sports', subscribed: false },
      ],
    });
    expect(await subscribers('news')).not.toContain(user);

    // A token without topics allows none; POST /tokens refuses topics that are no topic names.
    const plain = await connected(randomId('dan'));
    expect(await emitTopics(plain, 'topics', {})).toEqual({ ok: true, topics: [] });
    expect(await emitTopics(plain, 'subscribe', { topic: 'news' })).toMatchObject({
      ok: false,
      code: 'HERALD_ERR_TOPIC_NOT_ALLOWED',
    });
    const refused = await call('POST', '/tokens', { userId: user, topics: ['a b'] });
    expect(refused).toMatchObject({ status: 400, body: { code: 'HERALD_ERR_VALIDATION' } });
  });
});
