import { createRequire } from 'node:module';
import { randomId, startApp, waitFor } from '@herald/testing';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  API_KEY_2,
  auth,
  buildTestApp,
  disposeTestApp,
  everyPartition,
  testAppForFile,
  testEnv,
} from './helpers.js';

const require = createRequire(import.meta.url);

/** A real worker process on the settings of gateway environment `env`. */
const startWorker = (env: Record<string, string>) =>
  startApp({
    name: 'worker',
    entry: require.resolve('@herald/worker/server'),
    env: { ...env, HERALD_LOG_LEVEL: 'info' },
  });

const env = testEnv({ HERALD_SENDER_RATE_LIMIT_BURST: '1000', HERALD_INBOX_RATE_LIMIT_BURST: '1000' });
const app = await testAppForFile(env);
let other: { authorization: string };
beforeAll(async () => {
  const key = await app.apiKeys.create({ name: 'globex', tenantId: 'globex' });
  other = { authorization: `Bearer ${key.key}` };
});

// `target`: the file's gateway unless a test builds its own.
const put = (topic: string, userIds: string[], headers = auth, target = app) =>
  target.inject({ method: 'PUT', url: `/topics/${topic}/subscribers`, headers, payload: { userIds } });
const notify = (payload: Record<string, unknown>, headers: Record<string, string> = auth, target = app) =>
  target.inject({ method: 'POST', url: '/notify', headers, payload });
const statusOf = async (id: string, headers = auth, query = '', target = app) =>
  target.inject({ method: 'GET', url: `/notifications/${id}${query}`, headers });

describe('topic subscribers', () => {
  it('subscribes and unsubscribes in batches and one at a time, idempotently', async () => {
    const topic = randomId('topic');
    expect((await put(topic, ['alice', 'bob', 'alice'])).json()).toEqual({
      topic,
      changed: 2,
      subscribers: 2,
    });
    expect((await put(topic, ['bob'])).json()).toMatchObject({ changed: 0, subscribers: 2 });
    const one = await app.inject({ method: 'PUT', url: `/topics/${topic}/subscribers/carol`, headers: auth });
    expect(one.json()).toMatchObject({ changed: 1, subscribers: 3 });
    const removed = await app.inject({
      method: 'DELETE',
      url: `/topics/${topic}/subscribers`,
      headers: auth,
      payload: { userIds: ['alice', 'nobody'] },
    });
    expect(removed.json()).toMatchObject({ changed: 1, subscribers: 2 });
    const alone = await app.inject({
      method: 'DELETE',
      url: `/topics/${topic}/subscribers/bob`,
      headers: auth,
    });
    expect(alone.statusCode).toBe(200);
    expect(alone.json()).toMatchObject({ changed: 1, subscribers: 1 });
  });

  it('a topic name or user id with / goes percent-encoded; sent bare, the 404 says so', async () => {
    const topic = `${randomId('shop')}/orders`;
    const encoded = await put(encodeURIComponent(topic), ['a/b']);
    expect(encoded.json()).toMatchObject({ topic, changed: 1, subscribers: 1 });
    for (const url of [
      `/topics/${topic}/subscribers`,
      `/topics/x/subscribers/a/b`,
      '/users/a/b/preferences',
    ]) {
      const bare = await app.inject({ method: 'GET', url, headers: auth });
      expect(bare.statusCode, url).toBe(404);
      expect(bare.json().error, url).toMatch(/%2F/);
    }
  });

  it('lists subscribers in pages by cursor, each once, in user id order', async () => {
    const topic = randomId('topic');
    const userIds = Array.from({ length: 25 }, (_, i) => `user-${String(i).padStart(2, '0')}`);
    await put(topic, [...userIds].reverse());
    const seen: string[] = [];
    let after: string | null | undefined;
    do {
      const query = after ? `?limit=7&after=${after}` : '?limit=7';
      const response = await app.inject({
        method: 'GET',
        url: `/topics/${topic}/subscribers${query}`,
        headers: auth,
      });
      expect(response.statusCode).toBe(200);
      const page = response.json<{ userIds: string[]; nextAfter: string | null; subscribers: number }>();
      expect(page.subscribers).toBe(25);
      seen.push(...page.userIds);
      after = page.nextAfter;
    } while (after);
    expect(seen).toEqual(userIds);
  });

  it.each([
    ['a topic with a space', '/topics/a%20b/subscribers', { userIds: ['a'] }, 'params.topic'],
    ['a topic of 65 characters', `/topics/${'t'.repeat(65)}/subscribers`, { userIds: ['a'] }, 'params.topic'],
    ['a topic with braces', '/topics/%7Bx%7D/subscribers', { userIds: ['a'] }, 'params.topic'],
    // `.` or `..` alone or between slashes: a path segment no URL can name (clients and proxies resolve
    // it), so such a topic's routes could not be reached.
    ['a topic a/../b', '/topics/a%2F..%2Fb/subscribers', { userIds: ['a'] }, 'params.topic'],
    ['no user ids', '/topics/t/subscribers', { userIds: [] }, 'body.userIds'],
    [
      '1,001 user ids',
      '/topics/t/subscribers',
      { userIds: Array.from({ length: 1001 }, (_, i) => `u${i}`) },
      'body.userIds',
    ],
    ['a bad user id', '/topics/t/subscribers', { userIds: ['a b'] }, 'body.userIds.0'],
    ['an unknown field', '/topics/t/subscribers', { userIds: ['a'], extra: 1 }, 'body.extra'],
  ])('refuses %s with a 400 naming the field', async (_name, url, payload, field) => {
    const response = await app.inject({ method: 'PUT', url, headers: auth, payload });
    expect(response.statusCode).toBe(400);
    const body = response.json<{ code: string; details: { field: string }[] }>();
    expect(body.code).toBe('HERALD_ERR_VALIDATION');
    expect(body.details.map((detail) => detail.field)).toContain(field);
  });

  it('needs an API key', async () => {
    const response = await app.inject({ method: 'GET', url: '/topics/t/subscribers' });
    expect(response.statusCode).toBe(401);
  });

  it("a tenant never sees another tenant's topic of the same name", async () => {
    const topic = randomId('topic');
    await put(topic, ['alice']);
    const theirs = await app.inject({ method: 'GET', url: `/topics/${topic}/subscribers`, headers: other });
    expect(theirs.json()).toMatchObject({ userIds: [], subscribers: 0 });
    await put(topic, ['mallory'], other);
    const ours = await app.inject({ method: 'GET', url: `/topics/${topic}/subscribers`, headers: auth });
    expect(ours.json()).toMatchObject({ userIds: ['alice'], subscribers: 1 });
  });
});

describe('POST /notify to a topic or to everyone', () => {
  it('a topic send is one 202 with one id and one fan-out job of the caller’s tenant', async () => {
    const topic = randomId('topic');
    await put(topic, ['alice', 'bob']);
    const response = await notify({ topic, payload: { title: 'hi' }, type: 'news' });
    expect(response.statusCode).toBe(202);
    const { id } = response.json<{ id: string }>();
    const job = await app.fanoutQueue.getJob(id);
    expect(job?.data).toMatchObject({ id, tenantId: 'default', audience: { topic }, type: 'news' });
    expect(await everyPartition(app).getJob(id)).toBeUndefined();
    const status = await statusOf(id);
    expect(status.json()).toMatchObject({
      id,
      status: 'queued',
      topic,
      recipients: { total: 2, reached: 0 },
    });
    expect(status.json()).not.toHaveProperty('userId');
  });

  it('a broadcast is one job too', async () => {
    const response = await notify({ broadcast: true, payload: {} });
    expect(response.statusCode).toBe(202);
    const { id } = response.json<{ id: string }>();
    expect((await app.fanoutQueue.getJob(id))?.data.audience).toEqual({ broadcast: true });
    expect((await statusOf(id)).json()).toMatchObject({ status: 'queued', broadcast: true });
  });

  it.each([
    ['no target', { payload: {} }, 'body.userId'],
    ['broadcast with a userId', { broadcast: true, userId: 'a', payload: {} }, 'body.broadcast'],
    ['broadcast with a topic', { broadcast: true, topic: 't', payload: {} }, 'body.broadcast'],
    ['broadcast: false', { broadcast: false, payload: {} }, 'body.broadcast'],
    ['a bad topic', { topic: 'a b', payload: {} }, 'body.topic'],
    ['a topic ./x', { topic: './x', payload: {} }, 'body.topic'],
    ['a topic ..', { topic: '..', payload: {} }, 'body.topic'],
    // Above BullMQ's largest priority (2 ** 21 - 1): was a 503 "maybe accepted" that stored nothing.
    ['a topic send with priority 2097152', { topic: 't', payload: {}, priority: 2_097_152 }, 'body.priority'],
    [
      'a broadcast with priority 2097152',
      { broadcast: true, payload: {}, priority: 2_097_152 },
      'body.priority',
    ],
  ])('refuses %s with a 400 naming the field', async (_name, payload, field) => {
    const response = await notify(payload);
    expect(response.statusCode).toBe(400);
    const body = response.json<{ code: string; details: { field: string }[] }>();
    expect(body.code).toBe('HERALD_ERR_VALIDATION');
    expect(body.details.map((detail) => detail.field)).toContain(field);
  });

  it("a topic send and a broadcast with priority 2097151 (BullMQ's largest) are 202, their jobs stored with it", async () => {
    for (const target of [{ topic: randomId('topic') }, { broadcast: true }]) {
      const response = await notify({ ...target, payload: {}, priority: 2_097_151 });
      expect(response.statusCode).toBe(202);
      const job = await app.fanoutQueue.getJob(response.json<{ id: string }>().id);
      expect(job?.data.priority).toBe(2_097_151);
      expect(job?.opts.priority).toBe(2_097_151);
    }
  });

  it('a retry with the same Idempotency-Key answers the same id and enqueues nothing more', async () => {
    const topic = randomId('topic');
    const headers = { ...auth, 'idempotency-key': randomId('key') };
    const first = await notify({ topic, payload: { n: 1 } }, headers);
    const second = await notify({ topic, payload: { n: 1 } }, headers);
    expect(second.json()).toEqual(first.json());
    const jobs = await app.fanoutQueue.getJobs(['waiting', 'delayed', 'prioritized']);
    expect(
      jobs.filter((job) => 'topic' in job.data.audience && job.data.audience.topic === topic),
    ).toHaveLength(1);
  });

  it('DELETE of a topic send not yet begun is a 409 that says why, not that it is too late', async () => {
    const id = (await notify({ topic: randomId('topic'), payload: {}, delayMs: 60_000 })).json<{
      id: string;
    }>().id;
    const refused = await app.inject({ method: 'DELETE', url: `/notifications/${id}`, headers: auth });
    expect(refused.statusCode).toBe(409);
    expect(refused.json()).toMatchObject({ code: 'HERALD_ERR_NOT_CANCELLABLE', state: 'queued' });
    // "queued: it can no longer be cancelled" read as if a single send's window had passed.
    expect(refused.json().error).toMatch(/topic send or broadcast/);
    expect(refused.json().error).not.toMatch(/no longer/);
  });

  it('?userId= of a topic send not yet fanned out: queued for a subscriber, 404 for a user not in its audience', async () => {
    const topic = randomId('topic');
    const [ann, typo] = [randomId('ann'), randomId('annn')];
    await put(topic, [ann]);
    const id = (await notify({ topic, payload: {}, delayMs: 60_000 })).json<{ id: string }>().id;
    expect((await statusOf(id, auth, `?userId=${ann}`)).json()).toMatchObject({
      status: 'queued',
      userId: ann,
    });
    // Answered `queued` before: as if it would reach them, until the fan-out ended and it became a 404.
    const stranger = await statusOf(id, auth, `?userId=${typo}`);
    expect(stranger.statusCode).toBe(404);
    expect(stranger.json()).toMatchObject({ code: 'HERALD_ERR_NOT_FOUND' });
  });

  it("another tenant's key cannot read a topic send's status", async () => {
    const id = (await notify({ topic: randomId('topic'), payload: {} })).json<{ id: string }>().id;
    expect((await statusOf(id, other)).statusCode).toBe(404);
  });
});

describe('a topic send through a worker', () => {
  it('reaches every subscriber: status `sent` with the counts, and each recipient’s own status by ?userId=', async () => {
    // Earlier tests' sends (a broadcast among them) are not this test's to fan out.
    await app.fanoutQueue.obliterate({ force: true });
    const worker = await startWorker(env);
    try {
      const topic = randomId('topic');
      const [ann, ben, cy] = ['ann', 'ben', 'cy'].map((name) => randomId(name));
      await put(topic, [ann, ben, cy] as string[]);
      const { id } = (await notify({ topic, payload: { title: 'sale' } })).json<{ id: string }>();
      const sent = await waitFor(
        async () => {
          const body = (await statusOf(id)).json<{ status: string }>();
          return body.status === 'sent' ? body : undefined;
        },
        { what: 'the fan-out to be sent' },
      );
      expect(sent).toMatchObject({
        status: 'sent',
        topic,
        recipients: { total: 3, reached: 3, expired: 0, deduplicated: 0 },
        sentAt: expect.any(String),
      });
      // Ann's client acks it: her status is `delivered`, the others' `queued`.
      const items = await app.inbox.list(ann as string);
      expect(items.items.map((item) => item.id)).toContain(id);
      await app.inbox.ack(ann as string, [id], 'test');
      expect((await statusOf(id, auth, `?userId=${ann}`)).json()).toMatchObject({
        userId: ann,
        status: 'delivered',
      });
      expect((await statusOf(id, auth, `?userId=${ben}`)).json()).toMatchObject({
        userId: ben,
        status: 'queued',
      });
      expect((await statusOf(id, auth, '?userId=zed')).statusCode).toBe(404);
      // The unread count of each recipient counts it.
      const benInbox = await app.inject({ method: 'GET', url: `/users/${ben}/notifications`, headers: auth });
      expect(benInbox.json()).toMatchObject({ unread: { count: 1 } });
    } finally {
      await worker.stop();
    }
  });

  it('the sender pays one token per recipient: the first at the gateway, the rest from the worker', async () => {
    const smallEnv = testEnv({
      HERALD_SENDER_RATE_LIMIT_BURST: '5',
      HERALD_SENDER_RATE_LIMIT_PER_SECOND: '0.001',
    });
    const small = await buildTestApp(smallEnv);
    const worker = await startWorker(smallEnv);
    try {
      const topic = randomId('topic');
      const headers = { authorization: `Bearer ${API_KEY_2}` };
      await put(topic, ['a', 'b', 'c', 'd'], headers, small);
      const first = await notify({ topic, payload: {} }, headers, small);
      expect(first.statusCode).toBe(202);
      const { id } = first.json<{ id: string }>();
      await waitFor(
        async () => (await statusOf(id, headers, '', small)).json<{ status: string }>().status === 'sent',
        { what: 'the fan-out to be sent' },
      );
      // 5 tokens: 4 recipients paid; one single send fits, the next is refused.
      const single = await notify({ userId: 'a', payload: {} }, headers, small);
      expect(single.statusCode).toBe(202);
      const refused = await notify({ userId: 'a', payload: {} }, headers, small);
      expect(refused.statusCode).toBe(429);
      expect(refused.json()).toMatchObject({ code: 'HERALD_ERR_RATE_LIMITED', policy: 'sender' });
      const another = await notify({ topic, payload: {} }, headers, small);
      expect(another.statusCode).toBe(429);
    } finally {
      await worker.stop();
      await disposeTestApp(small);
    }
  });
});
