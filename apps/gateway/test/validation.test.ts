import { PRIORITY_MAX } from '@herald/protocol';
import { PRIORITY_LIMIT } from 'bullmq';
import Type from 'typebox';
import { beforeAll, describe, expect, it } from 'vitest';
import { compileBodySchema, issueDetails } from '../src/plugins/app/validation.js';
import { auth, everyPartition, postRaw, testAppForFile } from './helpers.js';

const app = await testAppForFile({ HERALD_RATE_LIMIT_BURST: '1000', HERALD_SENDER_RATE_LIMIT_BURST: '1000' });
let base: string;
beforeAll(async () => {
  await app.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.address();
  base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
});

const post = (payload: unknown, headers: Record<string, string> = auth) =>
  app.inject({ method: 'POST', url: '/notify', headers, payload: payload as object });

describe('validation: every problem is a 4xx naming the field', () => {
  it.each([
    ['a userId with a space', { userId: 'a b', payload: {} }, 'body.userId'],
    ['a userId with a newline', { userId: 'a\nb', payload: {} }, 'body.userId'],
    ['a userId of 257 chars', { userId: 'u'.repeat(257), payload: {} }, 'body.userId'],
    ['a payload that is an array', { userId: 'a', payload: [1, 2] }, 'body.payload'],
    ['a payload that is null', { userId: 'a', payload: null }, 'body.payload'],
    ['priority 0', { userId: 'a', payload: {}, priority: 0 }, 'body.priority'],
    ['priority 1.5', { userId: 'a', payload: {}, priority: 1.5 }, 'body.priority'],
    // BullMQ's largest priority is 2 ** 21 - 1: one more was a 503 "maybe accepted" that stored nothing.
    ['priority 2097152', { userId: 'a', payload: {}, priority: 2_097_152 }, 'body.priority'],
    ['a negative delayMs', { userId: 'a', payload: {}, delayMs: -1 }, 'body.delayMs'],
    ['a ttlMs below 1 s', { userId: 'a', payload: {}, ttlMs: 10 }, 'body.ttlMs'],
    // It would expire before it could be delivered: never a 202 for a send that can only expire.
    ['a ttlMs not above its delayMs', { userId: 'a', payload: {}, ttlMs: 1000, delayMs: 2000 }, 'body.ttlMs'],
    ['a ttlMs equal to its delayMs', { userId: 'a', payload: {}, ttlMs: 5000, delayMs: 5000 }, 'body.ttlMs'],
    [
      'a topic send whose ttlMs is not above its delayMs',
      { topic: 't', payload: {}, ttlMs: 1000, delayMs: 1000 },
      'body.ttlMs',
    ],
    ['an empty dedupeKey', { userId: 'a', payload: {}, dedupeKey: '' }, 'body.dedupeKey'],
    ['a topic with a space', { userId: 'a', payload: {}, topic: 'a b' }, 'body.topic'],
    ['a string number for priority', { userId: 'a', payload: {}, priority: '3' }, 'body.priority'],
  ])('400 for %s', async (_name, body, field) => {
    const response = await post(body);
    expect(response.statusCode).toBe(400);
    const json = response.json<{ code: string; error: string; details: { field: string }[] }>();
    expect(json.code).toBe('HERALD_ERR_VALIDATION');
    expect(json.details[0]?.field).toBe(field);
    expect(json.error).toContain(field);
  });

  it('a number beyond ±(2^53 - 1): outside the payload a 400 naming its field, never advising a string (delayMs as a string is refused too); in the payload, the advice to send it as a string', async () => {
    for (const [raw, field] of [
      ['{"userId":"a","payload":{},"delayMs":1e20}', 'body.delayMs'],
      ['{"userId":"a","payload":{},"priority":-1e400}', 'body.priority'],
    ] as const) {
      const response = await app.inject({
        method: 'POST',
        url: '/notify',
        headers: { ...auth, 'content-type': 'application/json' },
        payload: raw,
      });
      expect(response.statusCode, raw).toBe(400);
      const json = response.json<{ error: string; details: { field: string; message: string }[] }>();
      expect(json.details[0]?.field, raw).toBe(field);
      expect(json.error, raw).not.toMatch(/string/);
    }
    const inPayload = await app.inject({
      method: 'POST',
      url: '/notify',
      headers: { ...auth, 'content-type': 'application/json' },
      payload: '{"userId":"a","payload":{"orderId":12345678901234567890}}',
    });
    expect(inPayload.statusCode).toBe(400);
    expect(inPayload.json()).toMatchObject({
      details: [{ field: 'body.payload.orderId', message: expect.stringContaining('send them as strings') }],
    });
  });

  it("names the largest priority in its 400, and takes that one (2097151, BullMQ's largest) with 202, stored", async () => {
    const above = await post({ userId: 'a', payload: {}, priority: 2_097_152 });
    expect(above.json<{ error: string }>().error).toContain('2097151');
    const response = await post({ userId: 'lowest-priority', payload: {}, priority: 2_097_151 });
    expect(response.statusCode).toBe(202);
    const job = await everyPartition(app).getJob(response.json<{ id: string }>().id);
    expect(job?.data).toMatchObject({ userId: 'lowest-priority', priority: 2_097_151 });
    expect(job?.opts.priority).toBe(2_097_151);
    expect(await job?.getState()).toBe('prioritized');
  });

  it("states BullMQ's largest priority everywhere: the protocol's PRIORITY_MAX and every priority of /openapi.json", async () => {
    expect(PRIORITY_MAX).toBe(PRIORITY_LIMIT);
    const maxima: unknown[] = [];
    const walk = (node: unknown): void => {
      if (typeof node !== 'object' || node === null) return;
      for (const [key, value] of Object.entries(node)) {
        if (key === 'priority' && typeof value === 'object' && value !== null && 'maximum' in value)
          maxima.push(value.maximum);
        walk(value);
      }
    };
    walk((await app.inject({ method: 'GET', url: '/openapi.json' })).json());
    // /notify (to a user, a topic, everyone) and a /notify/batch item.
    expect(maxima.length).toBeGreaterThanOrEqual(1);
    expect(new Set(maxima)).toEqual(new Set([PRIORITY_LIMIT]));
  });

  it('accepts a userId of 256 safe characters', async () => {
    const response = await post({ userId: `${'u'.repeat(250)}@a.b-c`, payload: {} });
    expect(response.statusCode).toBe(202);
  });

  it('413 for a payload over 16 KB, naming the field', async () => {
    const response = await post({ userId: 'a', payload: { text: 'x'.repeat(17 * 1024) } });
    expect(response.statusCode).toBe(413);
    expect(response.json()).toMatchObject({
      code: 'HERALD_ERR_PAYLOAD_TOO_LARGE',
      details: [{ field: 'body.payload' }],
    });
  });

  it('__proto__ and constructor keys in a payload change nothing', async () => {
    const raw =
      '{"userId":"proto-user","payload":{"__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}},"ok":1}}';
    const response = await postRaw(app, raw);
    // Fastify's secure JSON parser refuses prototype poisoning outright.
    expect(response.statusCode).toBe(400);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect((Object.prototype as Record<string, unknown>).polluted).toBeUndefined();

    const constructorOnly = await postRaw(
      app,
      '{"userId":"proto-user","payload":{"constructor":{"name":"x"},"toString":"y"}}',
    );
    expect(constructorOnly.statusCode).toBe(202);
    const job = await everyPartition(app).getJob(constructorOnly.json<{ id: string }>().id);
    expect(job?.data.payload).toEqual({ constructor: { name: 'x' }, toString: 'y' });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('carries every option to the job, and BullMQ priority and delay are set', async () => {
    const options = {
      priority: 3,
      delayMs: 60_000,
      ttlMs: 120_000,
      dedupeKey: 'order-42',
      topic: 'orders',
      type: 'order.shipped',
    };
    const response = await post({ userId: 'opts', payload: { a: 1 }, ...options });
    expect(response.statusCode).toBe(202);
    const job = await everyPartition(app).getJob(response.json<{ id: string }>().id);
    expect(job?.data).toMatchObject({ userId: 'opts', ...options, tenantId: 'default' });
    expect(job?.opts.priority).toBe(3);
    expect(job?.opts.delay).toBe(60_000);
    expect(await job?.getState()).toBe('delayed');
  });
});

describe('operations', () => {
  it('GET /readyz answers 200 when Redis and the queue answer', async () => {
    const response = await app.inject({ method: 'GET', url: '/readyz' });
    expect(response.statusCode).toBe(200);
  });

  it('GET /metrics exposes requests, limiter decisions, enqueue latency and queue depth', async () => {
    await post({ userId: 'metrics-user', payload: {} });
    const response = await app.inject({ method: 'GET', url: '/metrics' });
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toContain('text/plain');
    expect(response.body).toMatch(
      /herald_http_requests_total\{method="POST",route="\/notify",status="202"\} \d+/,
    );
    expect(response.body).toContain('herald_enqueue_duration_seconds_bucket');
    expect(response.body).toMatch(/herald_queue_jobs\{state="(waiting|wait)"\}/);
    expect(response.body).toMatch(
      /herald_ratelimit_decisions_total\{policy="recipient",outcome="allowed"\} [1-9]/,
    );
    expect(response.body).toMatch(
      /herald_ratelimit_decisions_total\{policy="sender",outcome="allowed"\} [1-9]/,
    );
  });

  it('a batch item whose ttlMs is not above its delayMs is rejected alone, naming its field', async () => {
    const response = await app.inject({
      method: 'POST',
      url: '/notify/batch',
      headers: auth,
      payload: {
        notifications: [
          { userId: 'ttl-ok', payload: {}, ttlMs: 3000, delayMs: 2000 },
          { userId: 'ttl-bad', payload: {}, ttlMs: 1000, delayMs: 2000 },
        ],
      },
    });
    expect(response.statusCode).toBe(202);
    const { results } = response.json<{
      results: { status: string; code?: string; details?: { field: string }[] }[];
    }>();
    expect(results[0]?.status).toBe('queued');
    expect(results[1]).toMatchObject({
      status: 'rejected',
      code: 'HERALD_ERR_VALIDATION',
      details: [{ field: 'body.notifications.1.ttlMs' }],
    });
  });

  it('serves an OpenAPI 3 document generated from the route schemas, and interactive docs', async () => {
    const spec = await app.inject({ method: 'GET', url: '/openapi.json' });
    expect(spec.statusCode).toBe(200);
    const document = spec.json<{ openapi: string; paths: Record<string, Record<string, unknown>> }>();
    expect(document.openapi).toMatch(/^3\./);
    expect(Object.keys(document.paths)).toEqual(
      expect.arrayContaining([
        '/notify',
        '/notify/batch',
        '/tokens',
        '/notifications/{id}',
        '/healthz',
        '/readyz',
      ]),
    );
    expect(JSON.stringify(document.paths['/notify'])).toContain('userId');
    const docs = await app.inject({ method: 'GET', url: '/docs/' });
    expect(docs.statusCode).toBe(200);
    expect(docs.body).toContain('swagger');
  });
});

describe('validation messages say what is allowed, and which form of a union body was meant', () => {
  const send = async (method: string, path: string, body: unknown) => {
    const response = await fetch(`${base}${path}`, {
      method,
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return {
      status: response.status,
      body: (await response.json()) as { error: string; details: unknown[] },
    };
  };

  it('a value outside a union of constants is named once, with the values allowed', async () => {
    const events = await send('PUT', '/webhook', {
      url: 'https://example.com/h',
      events: ['notification.read', 'notification.nope'],
    });
    expect(events.status).toBe(400);
    const allowed =
      'must be one of "notification.delivered", "notification.read", "notification.failed", "notification.expired"';
    expect(events.body).toMatchObject({
      error: `Invalid request: body.events.1 ${allowed}`,
      code: 'HERALD_ERR_VALIDATION',
      details: [{ field: 'body.events.1', message: allowed }],
    });
    expect(events.body.details).toHaveLength(1);
    // A single constant says which.
    const broadcast = await send('POST', '/notify', { broadcast: false, payload: {} });
    expect(broadcast.status).toBe(400);
    expect(broadcast.body.error).toBe('Invalid request: body.broadcast must be true');
  });

  it.each([
    [{ all: true, upTo: 'bad' }, 'body.upTo must match pattern "^\\d+-\\d+$"'],
    [{ all: false }, 'body.all must be true'],
    [{ all: true, x: 1 }, 'body.x is not an accepted field'],
    [{ upTo: '1-1' }, 'body.all is required'],
    [{ ids: [] }, 'body.ids must NOT have fewer than 1 items'],
    [{ ids: 'a' }, 'body.ids must be array'],
    [{ ids: [''] }, 'body.ids.0 must NOT have fewer than 1 characters'],
    [[], 'body must be object'],
    // Nothing of either form: both are named.
    [{}, 'body matches none of its accepted forms: body.ids is required; or body.all is required'],
    [{ x: 1 }, 'body matches none of its accepted forms: body.ids is required; or body.all is required'],
    // Both forms' keys: `all: true` matched its constant, so the form meant is `{ all, upTo? }`.
    [{ ids: ['a'], all: true }, 'body.ids is not an accepted field'],
  ])(
    'POST /users/:userId/notifications/read %j: the headline is the problem of the form that was meant',
    async (body, headline) => {
      const response = await send('POST', '/users/alice/notifications/read', body);
      expect(response.status).toBe(400);
      expect(response.body.error).toBe(`Invalid request: ${headline}`);
      expect(JSON.stringify(response.body.details)).not.toContain('must match a schema in anyOf');
    },
  );

  it('the details of a union body are those of the form that was meant', async () => {
    const response = await send('POST', '/users/alice/notifications/read', { all: true, upTo: 'bad' });
    expect(response.body.details).toEqual([
      { field: 'body.upTo', message: 'must match pattern "^\\d+-\\d+$"' },
    ]);
  });

  it('an unknown query parameter is a 400 naming it, not ignored (a typo would change the answer)', async () => {
    for (const [url, field] of [
      // userid for userId: the whole topic send's status instead of one recipient's.
      ['/notifications/x?userid=alice', 'querystring.userid'],
      // cursor for after: the first page again, forever.
      ['/users/alice/notifications?cursor=1-0', 'querystring.cursor'],
      ['/topics/news/subscribers?limit=2&offset=2', 'querystring.offset'],
    ] as const) {
      const response = await app.inject({ method: 'GET', url, headers: auth });
      expect(response.statusCode, url).toBe(400);
      expect(response.json(), url).toMatchObject({
        code: 'HERALD_ERR_VALIDATION',
        details: [{ field, message: 'is not an accepted parameter' }],
      });
    }
    expect(
      (await app.inject({ method: 'GET', url: '/users/alice/notifications?limit=1', headers: auth }))
        .statusCode,
    ).toBe(200);
  });

  it('a query parameter given twice is told as such, not as a wrong type', async () => {
    for (const [url, field] of [
      ['/users/alice/notifications?limit=5&limit=6', 'querystring.limit'],
      ['/users/alice/notifications?after=0-0&after=1-1', 'querystring.after'],
      ['/notifications/x?userId=a&userId=b', 'querystring.userId'],
    ] as const) {
      const response = await app.inject({ method: 'GET', url, headers: auth });
      expect(response.statusCode, url).toBe(400);
      expect(response.json(), url).toMatchObject({
        code: 'HERALD_ERR_VALIDATION',
        details: [{ field, message: 'is given more than once: give it once' }],
      });
    }
  });

  it('a body that needs at least one of its fields names them', async () => {
    const response = await send('PUT', '/users/alice/preferences/mutes', {});
    expect(response.status).toBe(400);
    expect(response.body.error).toBe(
      'Invalid request: body must have at least 1 of its fields topics, types',
    );
  });

  it('a route that takes no body refuses one with fields, naming the first, and does nothing; {} and null pass', async () => {
    const topic = `t${Date.now()}`;
    // The users to subscribe are in the path: a body of users read as the request's was dave subscribed.
    const subscribe = await send('PUT', `/topics/${topic}/subscribers/dave`, { userIds: ['eve'] });
    expect(subscribe.status).toBe(400);
    expect(subscribe.body.error).toBe(
      'Invalid request: body.userIds is not allowed: PUT /topics/:topic/subscribers/:userId takes no body',
    );
    expect(subscribe.body.details).toEqual([
      {
        field: 'body.userIds',
        message: 'is not allowed: PUT /topics/:topic/subscribers/:userId takes no body',
      },
    ]);
    const listed = await fetch(`${base}/topics/${topic}/subscribers`, { headers: auth });
    expect(((await listed.json()) as { userIds: string[] }).userIds).toEqual([]);
    const cancel = await send('DELETE', '/notifications/no-such-id', { reason: 'x' });
    expect(cancel.status).toBe(400);
    expect(cancel.body.details).toEqual([
      { field: 'body.reason', message: 'is not allowed: DELETE /notifications/:id takes no body' },
    ]);
    const notObject = await send('DELETE', '/notifications/no-such-id', ['x']);
    expect(notObject.status).toBe(400);
    expect(notObject.body.details).toEqual([
      { field: 'body', message: 'is not allowed: DELETE /notifications/:id takes no body' },
    ]);
    for (const empty of [{}, null]) {
      expect((await send('PUT', `/topics/${topic}/subscribers/dave`, empty)).status).toBe(200);
      expect((await send('DELETE', '/notifications/no-such-id', empty)).status).toBe(404);
    }
  });

  it('any union of constants or enum, nested or beside null, and any enum, lists the values allowed', () => {
    const validate = compileBodySchema(
      Type.Object({
        level: Type.Union([Type.Literal('low'), Type.Union([Type.Literal('mid'), Type.Literal('high')])]),
        color: Type.Optional(Type.Unsafe<string>({ enum: ['red', 'green'] })),
        size: Type.Optional(Type.Union([Type.Literal(1), Type.Literal(2), Type.Null()])),
        label: Type.Optional(Type.Union([Type.String(), Type.Null()])),
        tags: Type.Optional(
          Type.Array(Type.Union([Type.Literal('a'), Type.Unsafe<string>({ enum: ['b', 'c'] })])),
        ),
      }),
    );
    const problem = (value: unknown) => {
      expect(validate(value)).toBe(false);
      return issueDetails('body', validate.errors ?? []);
    };
    expect(problem({ level: 'none' })).toEqual([
      { field: 'body.level', message: 'must be one of "low", "mid", "high"' },
    ]);
    expect(problem({ level: 'low', color: 'blue' })).toEqual([
      { field: 'body.color', message: 'must be one of "red", "green"' },
    ]);
    expect(problem({ level: 'low', size: 3 })).toEqual([
      { field: 'body.size', message: 'must be one of 1, 2, null' },
    ]);
    expect(problem({ level: 'low', label: 5 })).toEqual([
      { field: 'body.label', message: 'must be string or null' },
    ]);
    expect(problem({ level: 'low', tags: ['a', 'd'] })).toEqual([
      { field: 'body.tags.1', message: 'must be one of "a", "b", "c"' },
    ]);
  });
});
