import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { API_KEY_2, auth, buildTestApp, disposeTestApp } from './helpers.js';

let app: FastifyInstance | undefined;
afterEach(async () => {
  if (app) await disposeTestApp(app);
  app = undefined;
});

const other = { authorization: `Bearer ${API_KEY_2}` };
const BURST = 3;

const token = (target: FastifyInstance, headers: Record<string, string> = auth) =>
  target.inject({ method: 'POST', url: '/tokens', headers, payload: { userId: 'alice' } });
const list = (target: FastifyInstance, headers: Record<string, string> = auth) =>
  target.inject({ method: 'GET', url: '/users/alice/notifications', headers });
const markRead = (target: FastifyInstance, headers: Record<string, string> = auth) =>
  target.inject({
    method: 'POST',
    url: '/users/alice/notifications/read',
    headers,
    payload: { all: true },
  });

/** A gateway whose API keys have BURST inbox requests each (list and mark-read together), refilled 0.01/s. */
const buildInboxLimitedApp = () =>
  buildTestApp({ HERALD_INBOX_RATE_LIMIT_BURST: String(BURST), HERALD_INBOX_RATE_LIMIT_PER_SECOND: '0.01' });

/** The same 429 as /notify's: body, Retry-After, and the draft-11 headers. */
function expectRateLimited(response: LightMyRequestResponse, policy: string): void {
  expect(response.statusCode).toBe(429);
  expect(response.json()).toMatchObject({
    error: 'Rate limit exceeded',
    code: 'HERALD_ERR_RATE_LIMITED',
    policy,
  });
  expect(response.json().retryAfterMs).toBeGreaterThan(0);
  expect(Number(response.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  expect(response.headers['ratelimit-policy']).toBe(`"${policy}";q=${BURST};w=300`);
  expect(response.headers.ratelimit).toMatch(new RegExp(`^"${policy}";r=0;t=\\d+$`));
}

describe('POST /tokens and the inbox routes: limited per API key', () => {
  it('POST /tokens: over the key’s burst a 429 like /notify’s; another key is not affected', async () => {
    app = await buildTestApp({
      HERALD_TOKEN_RATE_LIMIT_BURST: String(BURST),
      HERALD_TOKEN_RATE_LIMIT_PER_SECOND: '0.01',
    });
    const first = await token(app);
    expect(first.statusCode).toBe(200);
    expect(first.headers['ratelimit-policy']).toBe(`"tokens";q=${BURST};w=300`);
    expect(first.headers.ratelimit).toMatch(/^"tokens";r=2;t=\d+$/);
    for (let n = 1; n < BURST; n++) expect((await token(app)).statusCode).toBe(200);
    expectRateLimited(await token(app), 'tokens');
    // Denied from memory now, before the body is read: a malformed body is still a 429.
    const early = await app.inject({ method: 'POST', url: '/tokens', headers: auth, payload: '{' });
    expect(early.statusCode).toBe(429);
    expect((await token(app, other)).statusCode).toBe(200);
    // Another bucket: the inbox routes still answer.
    expect((await list(app)).statusCode).toBe(200);
  });

  it('inbox list and mark-read share the key’s inbox bucket; another key is not affected', async () => {
    app = await buildInboxLimitedApp();
    expect((await list(app)).statusCode).toBe(200);
    expect((await markRead(app)).statusCode).toBe(200);
    expect((await list(app)).statusCode).toBe(200);
    expectRateLimited(await markRead(app), 'inbox');
    expectRateLimited(await list(app), 'inbox');
    expect((await list(app, other)).statusCode).toBe(200);
    expect((await markRead(app, other)).statusCode).toBe(200);
    expect((await token(app)).statusCode).toBe(200);
  });

  it('an invalid request costs nothing (validated before the limit)', async () => {
    app = await buildInboxLimitedApp();
    for (let n = 0; n < 10; n++) {
      const bad = await app.inject({
        method: 'GET',
        url: '/users/alice/notifications?limit=0',
        headers: auth,
      });
      expect(bad.statusCode).toBe(400);
    }
    for (let n = 0; n < BURST; n++) expect((await list(app)).statusCode).toBe(200);
  });
});

describe('a key’s own recipient limits', () => {
  it('apply to buckets of their own: a stricter key never shrinks another key’s budget for a user (before: the tenant’s one bucket per user took each key’s burst and rate in turn)', async () => {
    app = await buildTestApp({ HERALD_RATE_LIMIT_BURST: '10', HERALD_RATE_LIMIT_PER_SECOND: '0.01' });
    const tenantId = 'acme-limits';
    const strict = await app.apiKeys.create({
      name: 'strict',
      tenantId,
      limits: { recipientBurst: 3, recipientPerSecond: 0.01 },
    });
    const normal = await app.apiKeys.create({ name: 'normal', tenantId });
    const send = (key: string) =>
      app?.inject({
        method: 'POST',
        url: '/notify',
        headers: { authorization: `Bearer ${key}` },
        payload: { userId: 'shared-user', payload: {} },
      }) as Promise<LightMyRequestResponse>;
    // The strict key: 3 for this user, then refused.
    for (let n = 0; n < 3; n++) expect((await send(strict.key)).statusCode).toBe(202);
    expect((await send(strict.key)).statusCode).toBe(429);
    // The other key still has the user's whole default burst (before: 0 left, the strict key's bucket).
    const statuses: number[] = [];
    for (let n = 0; n < 11; n++) statuses.push((await send(normal.key)).statusCode);
    expect(statuses.filter((status) => status === 202).length).toBe(10);
    expect(statuses.at(-1)).toBe(429);
  });
});
