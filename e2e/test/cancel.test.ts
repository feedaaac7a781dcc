import { type AppProcess, redisUrl } from '@herald/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CreatedKey, createKey } from './support/cli.js';
import { API_KEY, gatewayCall, randomId, Stack, type TestClient, TRIO, waitFor } from './support/stack.js';

describe('DELETE /notifications/:id: a notification not sent yet is cancelled (gateway, worker, realtime processes)', () => {
  const stack = new Stack(redisUrl());
  let gateway: AppProcess;
  let realtime: AppProcess;
  let other: CreatedKey;

  beforeAll(async () => {
    [gateway, realtime] = await Promise.all([
      stack.start(TRIO.gateway, 'gateway'),
      stack.start(TRIO.realtime, 'realtime'),
      stack.start(TRIO.worker, 'worker'),
    ]);
    other = await createKey(stack.env, 'tenant-b');
  });
  afterAll(() => stack.dispose());

  async function call(
    method: string,
    path: string,
    options: { body?: unknown; key?: string | null; headers?: Record<string, string> } = {},
  ): Promise<{ status: number; body: Record<string, unknown> }> {
    const { key = API_KEY, ...rest } = options;
    const { status, body } = await gatewayCall(gateway.url, key, method, path, rest);
    return { status, body };
  }

  async function send(userId: string, extra: Record<string, unknown> = {}, headers = {}): Promise<string> {
    const answer = await call('POST', '/notify', { body: { userId, payload: {}, ...extra }, headers });
    expect(answer.status, JSON.stringify(answer.body)).toBe(202);
    return answer.body.id as string;
  }

  async function connected(userId: string): Promise<TestClient> {
    const client = stack.client(userId);
    await client.connect(realtime.url);
    return client;
  }

  it('is never stored, pushed or shown; its status says cancelled; cancelling again answers the same', async () => {
    const user = randomId('alice');
    const client = await connected(user);
    const key = randomId('idem');
    const cancelled = await send(user, { delayMs: 4000 }, { 'idempotency-key': key });
    const answer = await call('DELETE', `/notifications/${cancelled}`);
    expect(answer).toMatchObject({
      status: 200,
      body: { id: cancelled, userId: user, status: 'cancelled', attempts: 0 },
    });
    expect(Date.parse(answer.body.cancelledAt as string)).toBeGreaterThan(Date.now() - 60_000);
    expect(await call('DELETE', `/notifications/${cancelled}`)).toEqual(answer);
    // The backend's retry with the same Idempotency-Key answers the same notification, still cancelled.
    expect(await send(user, { delayMs: 4000 }, { 'idempotency-key': key })).toBe(cancelled);
    // Sent after it, due after it: once this one is shown, the cancelled one's time has passed.
    const fence = await send(user, { delayMs: 4200 });
    await waitFor(() => client.received.some((event) => event.id === fence), {
      timeoutMs: 30_000,
      what: 'the later notification shown',
    });
    expect(client.received.map((event) => event.id)).toEqual([fence]);
    expect(await stack.queueOf(user).getJob(cancelled)).toBeUndefined();
    expect(await stack.inboxIds(user)).toEqual([fence]);
    expect((await call('GET', `/notifications/${cancelled}`)).body).toEqual(answer.body);
    // Exact unread count: the cancelled one never counted.
    expect(client.unread?.count).toBe(1);
  });

  it('refuses once a worker has stored it: 409 HERALD_ERR_NOT_CANCELLABLE with its state', async () => {
    const user = randomId('bob');
    const client = await connected(user);
    const id = await send(user);
    await waitFor(() => client.received.some((event) => event.id === id), { what: 'shown' });
    const answer = await call('DELETE', `/notifications/${id}`);
    expect(answer).toMatchObject({
      status: 409,
      body: { code: 'HERALD_ERR_NOT_CANCELLABLE', state: expect.stringMatching(/^(queued|delivered)$/) },
    });
    expect(answer.body.error).toContain(id);
    expect(await stack.inboxIds(user)).toEqual([id]);
  });

  it('another tenant cannot cancel it (404, as if missing), and it is still delivered', async () => {
    const user = randomId('carol');
    const client = await connected(user);
    const id = await send(user, { delayMs: 300 });
    const answer = await call('DELETE', `/notifications/${id}`, { key: other.key });
    expect(answer).toMatchObject({ status: 404, body: { code: 'HERALD_ERR_NOT_FOUND' } });
    await waitFor(() => client.received.some((event) => event.id === id), {
      timeoutMs: 30_000,
      what: 'delivered anyway',
    });
  });

  it('answers unknown ids, bad ids and missing keys with clear 4xx JSON', async () => {
    expect(await call('DELETE', `/notifications/${randomId('nope')}`)).toMatchObject({
      status: 404,
      body: { code: 'HERALD_ERR_NOT_FOUND' },
    });
    const long = await call('DELETE', `/notifications/${'x'.repeat(129)}`);
    expect(long.status).toBe(400);
    expect(JSON.stringify(long.body)).toContain('id');
    expect(await call('DELETE', `/notifications/${randomId('n')}`, { key: null })).toMatchObject({
      status: 401,
      body: { code: 'HERALD_ERR_UNAUTHORIZED' },
    });
  });
});
