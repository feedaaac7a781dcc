import { createRequire } from 'node:module';
import { type AppProcess, randomId, startApp, waitFor } from '@herald/testing';
import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import type { InjectOptions } from 'light-my-request';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { auth, disposeTestApp, everyPartition, testAppForFile, testEnv } from './helpers.js';

const app = await testAppForFile({
  HERALD_RATE_LIMIT_BURST: '100000',
  HERALD_SENDER_RATE_LIMIT_BURST: '100000',
});

const knownPaths = [
  '/notify',
  '/notify/batch',
  '/tokens',
  '/notifications/x',
  '/users/x/notifications',
  '/users/a%2Fb/notifications/read',
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
        fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS'),
        path,
        headers,
        body,
        async (method, url, hdrs, payload) => {
          const request: InjectOptions = {
            method: method as NonNullable<InjectOptions['method']>,
            url,
            headers: Object.fromEntries(Object.entries(hdrs).filter((entry) => entry[1] !== undefined)),
          };
          if (method !== 'GET' && method !== 'HEAD') request.payload = payload;
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

// Structure rather than values: raw JSON text, so that it can say what JSON.stringify never would
// (1e400, lone surrogates, duplicate keys), at depths, widths and sizes at and around the limits.
const leafText = fc.oneof(
  fc.constantFrom(
    '1e400',
    '-1e400',
    '-0',
    '9007199254740993',
    '-9007199254740993',
    '1e-400',
    '1.7976931348623157e308',
    '5e-324',
    '0.1',
    'true',
    'false',
    'null',
    '""',
    '"\\u0000"',
    '"\\ud800"',
    '"x\\udfff"',
    '"\\ud83d\\ude00"',
    '"😀"',
    '"\\u2028\\u2029"',
    '"\\"\\\\"',
  ),
  // UTF-16 code units, lone surrogates included (JSON.stringify escapes them).
  fc
    .string({ maxLength: 20, unit: fc.integer({ min: 0, max: 0xffff }).map((n) => String.fromCharCode(n)) })
    .map((s) => JSON.stringify(s)),
  fc.double().map((d) => (Number.isFinite(d) ? String(d) : '1e999')),
  fc.integer().map(String),
);
const keyText = fc.oneof(
  fc.string({ maxLength: 8 }).map((s) => JSON.stringify(s)),
  fc.constantFrom(
    '"__proto__"',
    '"constructor"',
    '"prototype"',
    '"\\ud800"',
    '"\\u0000"',
    '"toString"',
    '""',
  ),
  fc.integer({ min: 100, max: 16_000 }).map((n) => JSON.stringify('k'.repeat(n))),
);
const nestedText = fc
  .record({
    depth: fc.oneof(
      fc.integer({ min: 1, max: 34 }),
      fc.constantFrom(30, 31, 32, 33, 63, 64, 65, 1000, 3000, 10_000),
    ),
    array: fc.boolean(),
    leaf: leafText,
  })
  .map(({ depth, array, leaf }) =>
    array
      ? `${'['.repeat(depth)}${leaf}${']'.repeat(depth)}`
      : `${'{"a":'.repeat(depth)}${leaf}${'}'.repeat(depth)}`,
  );
const wideText = fc
  .record({ count: fc.constantFrom(1, 10, 1000, 3000, 20_000), array: fc.boolean(), leaf: leafText })
  .map(({ count, array, leaf }) =>
    array
      ? `[${Array.from({ length: count }, () => leaf).join(',')}]`
      : `{${Array.from({ length: count }, (_, i) => `"k${i}":${leaf}`).join(',')}}`,
  );
const { treeText } = fc.letrec<{ treeText: string; node: string }>((tie) => ({
  treeText: fc
    .array(fc.tuple(keyText, tie('node')), { maxLength: 5 })
    .map((entries) => `{${entries.map(([key, value]) => `${key}:${value}`).join(',')}}`),
  node: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    leafText,
    tie('treeText'),
    fc.array(tie('node'), { maxLength: 4 }).map((items) => `[${items.join(',')}]`),
  ),
}));
const payloadText = fc.oneof(
  nestedText.map((inner) => `{"n":${inner}}`),
  nestedText,
  wideText,
  treeText,
  fc.constantFrom('{"a":1,"a":2}', '{"constructor":{"prototype":{"x":1}}}', '{"__proto__":{"admin":true}}'),
  leafText,
);
const userText = fc.constantFrom('"fz-a"', '"fz-b"', '"fz/c@d"', '"fz-\\u0000"', '"fz-\\ud800"');
const bodyText = fc.oneof(
  fc.record({ user: userText, payload: payloadText }).map(({ user, payload }) => ({
    url: '/notify',
    text: `{"userId":${user},"payload":${payload}}`,
  })),
  fc
    .array(fc.record({ user: userText, payload: payloadText }), { minLength: 1, maxLength: 3 })
    .map((items) => ({
      url: '/notify/batch',
      text: `{"notifications":[${items.map(({ user, payload }) => `{"userId":${user},"payload":${payload}}`).join(',')}]}`,
    })),
);
const encodedRequest = fc.record({
  body: bodyText,
  bom: fc.boolean(),
  invalidUtf8: fc.nat(19).map((n) => n === 0),
  contentType: fc.constantFrom(
    'application/json',
    'application/json; charset=utf-8',
    'application/json;charset="UTF-8"',
    'application/json; charset=latin1',
    'application/json; boundary=x',
    'text/plain',
  ),
  contentEncoding: fc.constantFrom(undefined, undefined, undefined, 'identity', 'gzip', 'br'),
});

const require = createRequire(import.meta.url);

describe('fuzz: structure, sizes, numbers and encodings; what is accepted, a real worker delivers', () => {
  let gateway: FastifyInstance;
  let worker: AppProcess;
  beforeAll(async () => {
    const env = testEnv({
      HERALD_LOG_LEVEL: 'silent',
      HERALD_RATE_LIMIT_BURST: '1000000',
      HERALD_SENDER_RATE_LIMIT_BURST: '1000000',
      HERALD_INBOX_PREFIX: `${randomId('inbox')}:`,
      HERALD_PUBSUB_KEY: randomId('pubsub'),
      // The default: what is accepted rides in envelopes.
      HERALD_ENVELOPE_WINDOW_MS: '10',
    });
    gateway = await buildApp(loadConfig(env));
    worker = await startApp({
      name: 'worker',
      entry: require.resolve('@herald/worker/server'),
      env: { ...env, HERALD_LOG_LEVEL: 'info', HERALD_JOB_BACKOFF_MS: '10' },
    });
  });
  afterAll(async () => {
    await worker?.stop();
    await disposeTestApp(gateway);
  });

  it('2,000 hostile bodies: no 5xx; every 202 is in its inbox exactly as sent, and no job fails', async () => {
    const unexpected: string[] = [];
    /** Accepted notifications: id → the payload as JSON would carry it. */
    const accepted = new Map<string, { userId: string; payload: string }>();
    await fc.assert(
      fc.asyncProperty(encodedRequest, async ({ body, bom, invalidUtf8, contentType, contentEncoding }) => {
        let bytes = Buffer.from(`${bom ? '\ufeff' : ''}${body.text}`);
        if (invalidUtf8)
          bytes = Buffer.concat([
            bytes.subarray(0, -1),
            Buffer.from(',"bad":"'),
            Buffer.from([0xc3, 0x28]),
            Buffer.from('"}'),
          ]);
        const headers: Record<string, string> = { ...auth, 'content-type': contentType };
        if (contentEncoding) headers['content-encoding'] = contentEncoding;
        const response = await gateway.inject({ method: 'POST', url: body.url, headers, payload: bytes });
        if (response.statusCode >= 500) {
          unexpected.push(
            `${body.url} ${response.statusCode} ${response.body} for ${body.text.slice(0, 200)}`,
          );
          return false;
        }
        if (response.statusCode !== 202) {
          const error = response.json<{ error?: unknown; code?: unknown }>();
          return typeof error.error === 'string' && typeof error.code === 'string';
        }
        const sent = JSON.parse(body.text) as {
          userId: string;
          payload: unknown;
          notifications?: { userId: string; payload: unknown }[];
        };
        const items = sent.notifications ?? [sent];
        const results =
          body.url === '/notify'
            ? [{ index: 0, status: 'queued', id: response.json<{ id: string }>().id }]
            : response.json<{ results: { index: number; status: string; id?: string }[] }>().results;
        for (const result of results) {
          const item = items[result.index];
          if (result.status === 'queued' && result.id && item) {
            accepted.set(result.id, { userId: item.userId, payload: JSON.stringify(item.payload) });
          }
        }
        return true;
      }),
      { numRuns: 2000 },
    );
    expect(unexpected).toEqual([]);
    // Not vacuous: about 5 % of the random bodies are valid (96 to 130 of 2,000 seen); 20 leaves room for
    // the draw without letting a gateway that refuses everything pass.
    expect(accepted.size).toBeGreaterThan(20);

    const stored = new Map<string, string>();
    const readInboxes = async () => {
      stored.clear();
      for (const userId of new Set([...accepted.values()].map((n) => n.userId))) {
        let after: string | undefined;
        for (;;) {
          const page = await gateway.inbox.list(userId, { ...(after ? { after } : {}), limit: 1000 });
          for (const item of page.items) stored.set(item.id, JSON.stringify(item.payload));
          if (page.nextAfter === null) break;
          after = page.nextAfter;
        }
      }
    };
    await waitFor(
      async () => {
        const counts = await everyPartition(gateway).getJobCounts('failed', 'wait', 'active', 'delayed');
        if ((counts.failed ?? 0) > 0) return true;
        await readInboxes();
        return [...accepted.keys()].every((id) => stored.has(id));
      },
      { timeoutMs: 60_000, what: `the worker to store ${accepted.size} notifications` },
    );
    const failed = await everyPartition(gateway).getFailed(0, 10);
    expect(failed.map((job) => `${job.id}: ${job.failedReason}`)).toEqual([]);
    expect(worker.lines.filter((line) => line.includes('notification attempt failed'))).toEqual([]);
    expect(worker.lines.filter((line) => line.includes('notification of an envelope failed'))).toEqual([]);
    for (const [id, notification] of accepted) expect(stored.get(id), id).toBe(notification.payload);
  });
});
