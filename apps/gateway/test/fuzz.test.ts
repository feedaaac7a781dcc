import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import type { InjectOptions } from 'light-my-request';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auth, buildTestApp, disposeTestApp } from './helpers.js';

let app: FastifyInstance;
beforeAll(async () => {
  app = await buildTestApp({ HERALD_RATE_LIMIT_BURST: '100000', HERALD_SENDER_RATE_LIMIT_BURST: '100000' });
});
afterAll(async () => {
  await disposeTestApp(app);
});

const knownPaths = [
  '/notify',
  '/notify/batch',
  '/tokens',
  '/notifications/x',
  '/healthz',
  '/readyz',
  '/openapi.json',
];
const path = fc.oneof(
  fc.constantFrom(...knownPaths),
  fc.constantFrom(...knownPaths).chain((base) => fc.string().map((suffix) => `${base}${encodeURI(suffix)}`)),
  fc.webPath().map((p) => (p.startsWith('/') ? p : `/${p}`)),
  fc.string({ maxLength: 40 }).map((s) => `/${encodeURIComponent(s)}`),
);
const jsonish = fc.oneof(
  fc.jsonValue(),
  fc.record({
    userId: fc.oneof(fc.string(), fc.jsonValue()),
    payload: fc.oneof(fc.object(), fc.jsonValue()),
  }),
  fc.record(
    {
      userId: fc.string({ minLength: 1, maxLength: 20 }),
      payload: fc.object(),
      priority: fc.jsonValue(),
      ttlMs: fc.jsonValue(),
    },
    { requiredKeys: ['userId'] },
  ),
  fc.record({
    notifications: fc.array(fc.record({ userId: fc.string(), payload: fc.object() }), { maxLength: 120 }),
  }),
);
const body = fc.oneof(
  jsonish.map((value) => JSON.stringify(value)),
  fc.string({ maxLength: 200 }),
  fc.constant(''),
);
const headers = fc.record(
  {
    authorization: fc.oneof(
      fc.constant(auth.authorization),
      fc.string(),
      fc.constant('Bearer '),
      fc.constant('Basic x'),
    ),
    'content-type': fc.oneof(
      fc.constant('application/json'),
      fc.constant('application/json; charset=utf-8'),
      fc.constant('text/plain'),
      fc.constant('application/x-www-form-urlencoded'),
      fc.string({ maxLength: 30 }).filter((s) => /^[\x21-\x7e]*$/.test(s)),
    ),
    'idempotency-key': fc.string({ maxLength: 300 }).filter((s) => /^[\x20-\x7e]*$/.test(s)),
    'x-request-id': fc.string({ maxLength: 50 }).filter((s) => /^[\x21-\x7e]*$/.test(s)),
  },
  { requiredKeys: [] },
);

describe('fuzz', () => {
  it('10,000 random requests: no 5xx, and the gateway still serves a valid request afterwards', async () => {
    const unexpected: string[] = [];
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH'),
        path,
        headers,
        body,
        async (method, url, hdrs, payload) => {
          const request: InjectOptions = {
            method: method as NonNullable<InjectOptions['method']>,
            url,
            headers: Object.fromEntries(Object.entries(hdrs).filter((entry) => entry[1] !== undefined)),
          };
          if (method !== 'GET') request.payload = payload;
          const response = await app.inject(request);
          if (response.statusCode >= 500)
            unexpected.push(`${method} ${url} ${response.statusCode} ${response.body}`);
          return response.statusCode < 500;
        },
      ),
      { numRuns: 10_000 },
    );
    expect(unexpected).toEqual([]);

    const ok = await app.inject({
      method: 'POST',
      url: '/notify',
      headers: auth,
      payload: { userId: 'after-fuzz', payload: { ok: true } },
    });
    expect(ok.statusCode).toBe(202);
  });
});
