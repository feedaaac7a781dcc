import { createRequire } from 'node:module';
import { verifyUserToken } from '@herald/protocol';
import { randomId, startApp, waitFor } from '@herald/testing';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auth, buildTestApp, disposeTestApp, JWT_SECRET, testEnv } from './helpers.js';

const require = createRequire(import.meta.url);

let app: FastifyInstance;
let globex: { authorization: string };
const env = testEnv({ HERALD_SENDER_RATE_LIMIT_BURST: '1000', HERALD_INBOX_RATE_LIMIT_BURST: '1000' });
beforeAll(async () => {
  app = await buildTestApp(env);
  const key = await app.apiKeys.create({ name: 'globex', tenantId: 'globex' });
  globex = { authorization: `Bearer ${key.key}` };
});
afterAll(async () => {
  await disposeTestApp(app);
});

type Muted = { topics: string[]; types: string[] };
const get = (userId: string, headers = auth) =>
  app.inject({ method: 'GET', url: `/users/${userId}/preferences`, headers });
const change = (method: 'PUT' | 'DELETE', userId: string, payload: unknown, headers = auth) =>
  app.inject({ method, url: `/users/${userId}/preferences/mutes`, headers, payload: payload as object });

describe('a user’s preferences (API key)', () => {
  it('mutes and unmutes topics and types in batches, idempotently', async () => {
    const user = randomId('u');
    expect((await get(user)).json()).toEqual({ userId: user, muted: { topics: [], types: [] } });
    const muted = await change('PUT', user, { topics: ['orders', 'marketing', 'orders'], types: ['digest'] });
    expect(muted.statusCode).toBe(200);
    expect(muted.json()).toEqual({
      userId: user,
      changed: 3,
      muted: { topics: ['marketing', 'orders'], types: ['digest'] },
    });
    expect((await change('PUT', user, { topics: ['orders'] })).json()).toMatchObject({ changed: 0 });
    const unmuted = await change('DELETE', user, { topics: ['orders', 'never-muted'] });
    expect(unmuted.json()).toEqual({
      userId: user,
      changed: 1,
      muted: { topics: ['marketing'], types: ['digest'] },
    });
    expect((await get(user)).json<{ muted: Muted }>().muted).toEqual({
      topics: ['marketing'],
      types: ['digest'],
    });
  });

  it.each([
    ['an empty body', {}, 'body'],
    ['an empty list', { topics: [] }, 'body.topics'],
    ['a bad topic name', { topics: ['a b'] }, 'body.topics.0'],
    ['a braced type', { types: ['{x}'] }, 'body.types.0'],
    ['a name over 64 characters', { types: ['t'.repeat(65)] }, 'body.types.0'],
    ['an unknown field', { topics: ['a'], users: ['b'] }, 'body'],
    ['a string instead of a list', { topics: 'a' }, 'body.topics'],
  ])('refuses %s with a 400 naming what is wrong', async (_name, payload, field) => {
    const response = await change('PUT', randomId('u'), payload);
    expect(response.statusCode).toBe(400);
    const body = response.json<{ code: string; details?: { field: string }[] }>();
    expect(body.code).toBe('HERALD_ERR_VALIDATION');
    expect((body.details ?? []).map((detail) => detail.field).join(' ')).toContain(field);
  });

  it('refuses a user id that is no user id, and a call without a key', async () => {
    expect((await get('%20')).statusCode).toBe(400);
    expect((await app.inject({ method: 'GET', url: '/users/alice/preferences' })).statusCode).toBe(401);
  });

  it('bounds the mutes per user at 1,000 with a 409 that adds nothing', async () => {
    const user = randomId('u');
    const topics = Array.from({ length: 1000 }, (_, i) => `t${i}`);
    expect((await change('PUT', user, { topics })).json()).toMatchObject({ changed: 1000 });
    const over = await change('PUT', user, { types: ['one-more'] });
    expect(over.statusCode).toBe(409);
    expect(over.json()).toMatchObject({ code: 'HERALD_ERR_TOO_MANY_MUTES' });
    expect((await get(user)).json<{ muted: Muted }>().muted.types).toEqual([]);
    // Muting again what is muted is not over the bound.
    expect((await change('PUT', user, { topics: ['t1'] })).statusCode).toBe(200);
    // One call names at most 1,000 in all (topics and types together): a 400 naming the body (before:
    // no `details`, and the README said each list alone).
    const both = {
      topics: Array.from({ length: 600 }, (_, i) => `x${i}`),
      types: Array.from({ length: 600 }, (_, i) => `y${i}`),
    };
    for (const method of ['PUT', 'DELETE'] as const) {
      const refused = await change(method, randomId('u'), both);
      expect(refused.statusCode).toBe(400);
      expect(refused.json()).toMatchObject({ code: 'HERALD_ERR_VALIDATION', details: [{ field: 'body' }] });
    }
  });

  it('keeps tenants apart: another tenant’s key neither sees nor changes these preferences', async () => {
    const user = randomId('u');
    await change('PUT', user, { topics: ['secret'] });
    expect((await get(user, globex)).json<{ muted: Muted }>().muted).toEqual({ topics: [], types: [] });
    expect((await change('DELETE', user, { topics: ['secret'] }, globex)).json()).toMatchObject({
      changed: 0,
    });
    await change('PUT', user, { types: ['theirs'] }, globex);
    expect((await get(user)).json<{ muted: Muted }>().muted).toEqual({ topics: ['secret'], types: [] });
  });
});

describe('POST /tokens with the topics a user may subscribe to themselves', () => {
  it('carries them in the token, and refuses names that are no topic names or too many', async () => {
    const token = async (payload: unknown) =>
      app.inject({ method: 'POST', url: '/tokens', headers: auth, payload: payload as object });
    const minted = await token({ userId: 'alice', topics: ['news', 'sports'] });
    expect(minted.statusCode).toBe(200);
    const claims = await verifyUserToken(minted.json<{ token: string }>().token, JWT_SECRET);
    expect(claims).toMatchObject({ userId: 'alice', tenantId: 'default', topics: ['news', 'sports'] });
    const bad = await token({ userId: 'alice', topics: ['a b'] });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({ code: 'HERALD_ERR_VALIDATION' });
    const many = Array.from({ length: 101 }, (_, i) => `t${i}`);
    expect((await token({ userId: 'alice', topics: many })).statusCode).toBe(400);
  });
});

describe('muted notifications through a worker', () => {
  it('a muted single send says `muted`, a topic send counts its muted recipients, the rest are stored', async () => {
    await app.fanoutQueue.obliterate({ force: true });
    const worker = await startApp({
      name: 'worker',
      entry: require.resolve('@herald/worker/server'),
      env: { ...env, HERALD_LOG_LEVEL: 'info' },
    });
    try {
      const [ann, ben] = [randomId('ann'), randomId('ben')];
      const topic = randomId('topic');
      await change('PUT', ann, { topics: [topic], types: ['digest'] });
      await app.inject({
        method: 'PUT',
        url: `/topics/${topic}/subscribers`,
        headers: auth,
        payload: { userIds: [ann, ben] },
      });
      const send = async (payload: Record<string, unknown>) =>
        (await app.inject({ method: 'POST', url: '/notify', headers: auth, payload })).json<{ id: string }>()
          .id;
      const statusOf = async (id: string, query = '') =>
        (await app.inject({ method: 'GET', url: `/notifications/${id}${query}`, headers: auth })).json<
          Record<string, unknown>
        >();
      const byType = await send({ userId: ann, type: 'digest', payload: {} });
      const byTopic = await send({ userId: ann, topic, payload: {} });
      const other = await send({ userId: ann, type: 'alert', payload: {} });
      const fanout = await send({ topic, payload: {} });
      const until = (id: string, done: (status: Record<string, unknown>) => boolean) =>
        waitFor(
          async () => {
            const status = await statusOf(id);
            return done(status) ? status : undefined;
          },
          { what: `notification ${id} to settle` },
        );
      const settled = (status: Record<string, unknown>) => status.status !== 'queued';
      expect(await until(byType, settled)).toMatchObject({
        status: 'muted',
        userId: ann,
        muted: { type: 'digest' },
      });
      expect(await until(byTopic, settled)).toMatchObject({ status: 'muted', muted: { topic } });
      expect(await until(fanout, (status) => status.status === 'sent')).toMatchObject({
        recipients: { total: 2, reached: 1, muted: 1, expired: 0, deduplicated: 0 },
      });
      expect(await statusOf(fanout, `?userId=${ann}`)).toMatchObject({ status: 'muted', muted: { topic } });
      await waitFor(async () => (await app.inbox.list(ann)).items.length === 1 || undefined);
      expect((await app.inbox.list(ann)).items.map((item) => item.id)).toEqual([other]);
      expect((await app.inbox.list(ben)).items.map((item) => item.id)).toEqual([fanout]);
    } finally {
      await worker.stop();
    }
  });
});
