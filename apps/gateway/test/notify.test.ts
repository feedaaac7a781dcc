import { verifyUserToken } from '@herald/protocol';
import type { FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  API_KEY_2,
  auth,
  buildTestApp,
  disposeTestApp,
  everyPartition,
  JWT_SECRET,
  postRaw,
} from './helpers.js';

let app: FastifyInstance;
beforeEach(async () => {
  app = await buildTestApp();
});
afterEach(async () => {
  await disposeTestApp(app);
});

/** `POST url` of `payload` as JSON, with the test key's `headers` unless others are given (`{}`: none). */
const post = (url: string, payload: object, headers: Record<string, string> = auth) =>
  app.inject({ method: 'POST', url, headers, payload });

describe('POST /notify', () => {
  it('answers 202 with an id only once the job is in Redis', async () => {
    const response = await post('/notify', { userId: 'alice', payload: { text: 'hello' } });
    expect(response.statusCode).toBe(202);
    const body = response.json<{ id: string; status: string }>();
    expect(body.status).toBe('queued');
    expect(body.id).toMatch(/^[0-9a-f-]{36}$/);
    const job = await everyPartition(app).getJob(body.id);
    expect(job?.data).toMatchObject({ id: body.id, userId: 'alice', payload: { text: 'hello' } });
    expect(Number.isNaN(Date.parse(job?.data.createdAt ?? ''))).toBe(false);
  });

  it('refuses a request without an API key with 401 JSON', async () => {
    const response = await post('/notify', { userId: 'a', payload: {} }, {});
    expect(response.statusCode).toBe(401);
    expect(response.json()).toMatchObject({
      code: 'HERALD_ERR_UNAUTHORIZED',
      error: expect.stringContaining('API key'),
    });
    expect(response.headers['www-authenticate']).toContain('Bearer');
  });

  it('an Authorization header that is not "Bearer <one key>" is told as such, not as a missing key', async () => {
    for (const authorization of ['Bearer a b', `Basic ${Buffer.from('u:p').toString('base64')}`, 'Bearer']) {
      const response = await post('/notify', { userId: 'a', payload: {} }, { authorization });
      expect(response.statusCode, authorization).toBe(401);
      expect(response.json().error, authorization).toBe(
        'The Authorization header is not "Bearer <api key>" (one key, no space inside it): send "Authorization: Bearer <api key>".',
      );
    }
  });

  it('refuses a wrong API key with 401 and enqueues nothing', async () => {
    const response = await post(
      '/notify',
      { userId: 'a', payload: {} },
      { authorization: 'Bearer not-a-key' },
    );
    expect(response.statusCode).toBe(401);
    expect(await everyPartition(app).count()).toBe(0);
  });

  it('accepts every configured key', async () => {
    const response = await post(
      '/notify',
      { userId: 'bob', payload: {} },
      { authorization: `Bearer ${API_KEY_2}` },
    );
    expect(response.statusCode).toBe(202);
  });

  it('names the missing field when userId is absent', async () => {
    const response = await post('/notify', { payload: {} });
    expect(response.statusCode).toBe(400);
    const body = response.json<{ error: string; code: string; details: { field: string }[] }>();
    expect(body.code).toBe('HERALD_ERR_VALIDATION');
    expect(body.error).toContain('userId');
    expect(body.details[0]?.field).toBe('body.userId');
  });

  it.each([
    ['payload is not an object', { userId: 'a', payload: 'text' }, 'body.payload'],
    ['userId is empty', { userId: '', payload: {} }, 'body.userId'],
    ['userId is a number', { userId: 42, payload: {} }, 'body.userId'],
    // No URL can name them: every WHATWG client (browsers, Node's fetch) resolves "." and ".." segments,
    // %2E too, so their inbox routes could never be reached.
    ['userId is "."', { userId: '.', payload: {} }, 'body.userId'],
    ['userId is ".."', { userId: '..', payload: {} }, 'body.userId'],
    // Nor a "." or ".." between slashes: the web server's /api proxy refuses such a path (%2F decoded).
    ['userId has a ".." part', { userId: 'a/..', payload: {} }, 'body.userId'],
    ['userId has a "." part', { userId: 'a/./b', payload: {} }, 'body.userId'],
    ['userId starts with a ".." part', { userId: '../a', payload: {} }, 'body.userId'],
    ['an unknown field is sent', { userId: 'a', payload: {}, priorty: 1 }, 'body.priorty'],
  ])('answers 400 naming the field when %s', async (_case, payload, field) => {
    const response = await post('/notify', payload);
    expect(response.statusCode).toBe(400);
    expect(response.json<{ details: { field: string }[] }>().details[0]?.field).toBe(field);
  });

  it('answers 400 for malformed JSON and 415 for another content type', async () => {
    const malformed = await postRaw(app, '{"userId": ');
    expect(malformed.statusCode).toBe(400);
    expect(malformed.json()).toMatchObject({ code: 'HERALD_ERR_VALIDATION' });
    const text = await postRaw(app, '<hello/>', 'application/xml');
    expect(text.statusCode).toBe(415);
    expect(text.json()).toMatchObject({ code: 'HERALD_ERR_UNSUPPORTED_MEDIA_TYPE' });
  });

  it('answers 413 for a body over 64 KB, naming the limit', async () => {
    const response = await post('/notify', { userId: 'a', payload: { blob: 'x'.repeat(70 * 1024) } });
    expect(response.statusCode).toBe(413);
    expect(response.json()).toMatchObject({ code: 'HERALD_ERR_BODY_TOO_LARGE' });
    expect(response.json().error).toContain('64 KB');
  });

  it('limits each recipient to its burst, then answers 429 with Retry-After', async () => {
    const limited = await buildTestApp({ HERALD_RATE_LIMIT_PER_SECOND: '0.5', HERALD_RATE_LIMIT_BURST: '3' });
    try {
      const send = (userId: string) =>
        limited.inject({ method: 'POST', url: '/notify', headers: auth, payload: { userId, payload: {} } });
      const statuses = [];
      for (let i = 0; i < 5; i++) statuses.push((await send('carol')).statusCode);
      expect(statuses).toEqual([202, 202, 202, 429, 429]);

      const denied = await send('carol');
      expect(denied.statusCode).toBe(429);
      const body = denied.json<{ error: string; retryAfterMs: number }>();
      expect(body.error).toBe('Rate limit exceeded');
      expect(body.retryAfterMs).toBeGreaterThan(0);
      expect(body.retryAfterMs).toBeLessThanOrEqual(2000);
      expect(denied.headers['retry-after']).toBe(String(Math.ceil(body.retryAfterMs / 1000)));
      // Another recipient has its own bucket.
      expect((await send('dave')).statusCode).toBe(202);
      expect(await limited.queue.count()).toBe(4);
    } finally {
      await limited.queue.obliterate({ force: true });
      await limited.close();
    }
  });
});

describe('POST /tokens', () => {
  it('issues a token for the user that the realtime server accepts', async () => {
    const response = await post('/tokens', { userId: 'erin' });
    expect(response.statusCode).toBe(200);
    const body = response.json<{ token: string; expiresAt: string }>();
    const verified = await verifyUserToken(body.token, JWT_SECRET);
    expect(verified.userId).toBe('erin');
    expect(verified.expiresAt.toISOString()).toBe(body.expiresAt);
    expect(Date.parse(body.expiresAt) - Date.now()).toBeGreaterThan(3500 * 1000);
  });

  it('requires an API key', async () => {
    const response = await post('/tokens', { userId: 'erin' }, {});
    expect(response.statusCode).toBe(401);
  });

  it('names the missing field', async () => {
    const response = await post('/tokens', {});
    expect(response.statusCode).toBe(400);
    expect(response.json<{ error: string }>().error).toContain('userId');
  });
});

describe('operations', () => {
  it('GET /healthz answers 200 when Redis answers', async () => {
    const response = await app.inject({ method: 'GET', url: '/healthz' });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual({ status: 'ok' });
  });

  it('unknown routes get a 404 JSON error', async () => {
    const response = await app.inject({ method: 'GET', url: '/nope?x=1' });
    expect(response.statusCode).toBe(404);
    expect(response.json()).toEqual({ error: 'No route GET /nope', code: 'HERALD_ERR_NOT_FOUND' });
  });
});
