import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { auth, buildTestApp, disposeTestApp, everyPartition } from './helpers.js';

/** The 202 of POST /notify/batch. */
interface BatchReply {
  accepted: number;
  rejected: number;
  results: { index: number; status: string; id?: string; code?: string; details?: { field: string }[] }[];
}

let app: FastifyInstance | undefined;
afterEach(async () => {
  if (app) await disposeTestApp(app);
  app = undefined;
});

const batch = (target: FastifyInstance, notifications: unknown[], headers: Record<string, string> = auth) =>
  target.inject({ method: 'POST', url: '/notify/batch', headers, payload: { notifications } });

describe('POST /notify/batch', () => {
  it('accepts up to 100 notifications and reports an id for each, in order', async () => {
    app = await buildTestApp({ HERALD_RATE_LIMIT_BURST: '1000', HERALD_SENDER_RATE_LIMIT_BURST: '1000' });
    const items = Array.from({ length: 100 }, (_, i) => ({ userId: `user-${i % 7}`, payload: { i } }));
    const response = await batch(app, items);
    expect(response.statusCode).toBe(202);
    const body = response.json<{
      accepted: number;
      results: { index: number; id: string; status: string }[];
    }>();
    expect(body.accepted).toBe(100);
    expect(body.results.map((result) => result.index)).toEqual(items.map((_, i) => i));
    const jobs = await Promise.all(
      body.results.map((result) => everyPartition(app as FastifyInstance).getJob(result.id)),
    );
    expect(jobs.map((job) => job?.data.payload.i)).toEqual(items.map((_, i) => i));
  });

  it('refuses 101 notifications and an empty batch whole', async () => {
    app = await buildTestApp();
    const tooMany = await batch(
      app,
      Array.from({ length: 101 }, () => ({ userId: 'u', payload: {} })),
    );
    expect(tooMany.statusCode).toBe(400);
    expect(tooMany.json<{ details: { field: string }[] }>().details[0]?.field).toBe('body.notifications');
    expect((await batch(app, [])).statusCode).toBe(400);
    expect(await everyPartition(app).count()).toBe(0);
  });

  it('rejects a bad item alone, naming its field, and sends the others', async () => {
    app = await buildTestApp();
    const response = await batch(app, [
      { userId: 'ok-1', payload: { n: 1 } },
      { userId: 'missing-payload' },
      { userId: 'ok-2', payload: { n: 2 } },
      { userId: 'big', payload: { x: 'y'.repeat(17_000) } },
      { userId: 'bad id', payload: {} },
    ]);
    expect(response.statusCode).toBe(202);
    const body = response.json<BatchReply>();
    expect(body).toMatchObject({ accepted: 2, rejected: 3 });
    expect(body.results.map((result) => [result.index, result.status])).toEqual([
      [0, 'queued'],
      [1, 'rejected'],
      [2, 'queued'],
      [3, 'rejected'],
      [4, 'rejected'],
    ]);
    expect(body.results[1]).toMatchObject({
      code: 'HERALD_ERR_VALIDATION',
      details: [{ field: 'body.notifications.1.payload' }],
    });
    expect(body.results[3]).toMatchObject({
      code: 'HERALD_ERR_PAYLOAD_TOO_LARGE',
      details: [{ field: 'body.notifications.3.payload' }],
    });
    expect(body.results[4]).toMatchObject({ details: [{ field: 'body.notifications.4.userId' }] });
    const jobs = await Promise.all(
      [0, 2].map((i) => everyPartition(app as FastifyInstance).getJob(body.results[i]?.id as string)),
    );
    expect(jobs.map((job) => job?.data.userId)).toEqual(['ok-1', 'ok-2']);
    expect(await everyPartition(app).count()).toBe(2);
  });

  it('a topic send or broadcast item is rejected alone, told to go to POST /notify, not that userId is missing', async () => {
    app = await buildTestApp();
    const response = await batch(app, [
      { userId: 'ok', payload: {} },
      { topic: 'orders', payload: {} },
      { broadcast: true, payload: {} },
    ]);
    const body = response.json<BatchReply & { results: { error?: string }[] }>();
    expect(body).toMatchObject({ accepted: 1, rejected: 2 });
    for (const index of [1, 2]) {
      expect(body.results[index]).toMatchObject({
        code: 'HERALD_ERR_VALIDATION',
        details: [{ field: `body.notifications.${index}.userId` }],
      });
      expect(body.results[index]?.error).toMatch(/POST \/notify/);
    }
  });

  it('rejects an item with priority 2097152 alone (naming its priority) and sends the others, 2097151 included', async () => {
    app = await buildTestApp();
    const response = await batch(app, [
      { userId: 'lowest', payload: {}, priority: 2_097_151 },
      { userId: 'beyond', payload: {}, priority: 2_097_152 },
      { userId: 'plain', payload: {} },
    ]);
    expect(response.statusCode).toBe(202);
    const body = response.json<BatchReply>();
    expect(body).toMatchObject({ accepted: 2, rejected: 1 });
    expect(body.results[1]).toMatchObject({
      status: 'rejected',
      code: 'HERALD_ERR_VALIDATION',
      details: [{ field: 'body.notifications.1.priority' }],
    });
    const jobs = await Promise.all(
      [0, 2].map((i) => everyPartition(app as FastifyInstance).getJob(body.results[i]?.id as string)),
    );
    expect(jobs.map((job) => job?.data.userId)).toEqual(['lowest', 'plain']);
    expect(jobs[0]?.opts.priority).toBe(2_097_151);
    expect(await everyPartition(app).count()).toBe(2);
  });

  it('answers 400 naming every problem when no item is valid', async () => {
    app = await buildTestApp();
    const response = await batch(app, [{ userId: 'u' }, { payload: {} }]);
    expect(response.statusCode).toBe(400);
    expect(response.json<{ details: { field: string }[] }>().details.map((detail) => detail.field)).toEqual([
      'body.notifications.0.payload',
      'body.notifications.1.userId',
    ]);
    expect(await everyPartition(app).count()).toBe(0);
  });

  it('costs one token per recipient, and a batch the limits cannot take is refused whole', async () => {
    app = await buildTestApp({ HERALD_RATE_LIMIT_BURST: '3', HERALD_RATE_LIMIT_PER_SECOND: '0.001' });
    // carol gets 2 of her 3 tokens' worth; dave 1.
    const first = await batch(app, [
      { userId: 'carol', payload: {} },
      { userId: 'carol', payload: {} },
      { userId: 'dave', payload: {} },
    ]);
    expect(first.statusCode).toBe(202);
    // 2 more for carol exceeds her bucket: nothing of this batch may be taken or enqueued, not even dave's.
    const refused = await batch(app, [
      { userId: 'dave', payload: {} },
      { userId: 'carol', payload: {} },
      { userId: 'carol', payload: {} },
    ]);
    expect(refused.statusCode).toBe(429);
    expect(refused.json()).toMatchObject({ code: 'HERALD_ERR_RATE_LIMITED', policy: 'recipient' });
    // As /notify's 429: both policies in RateLimit, the sender's with what it has left.
    expect(refused.headers['ratelimit-policy']).toMatch(/^"sender";q=\d+;w=\d+, "recipient";q=3;w=\d+$/);
    expect(refused.headers.ratelimit).toMatch(/^"sender";r=\d+;t=\d+, "recipient";r=\d+;t=\d+$/);
    expect(await everyPartition(app).count()).toBe(3);
    // dave's token was not consumed by the refused batch: he still has 2.
    const dave = await batch(app, [
      { userId: 'dave', payload: {} },
      { userId: 'dave', payload: {} },
    ]);
    expect(dave.statusCode).toBe(202);
    expect((await batch(app, [{ userId: 'carol', payload: {} }])).statusCode).toBe(202);
    expect((await batch(app, [{ userId: 'carol', payload: {} }])).statusCode).toBe(429);
    // Refused from memory (the deny cache, no Redis call) once Redis refused her: RateLimit-Policy still
    // names both policies, RateLimit the one that refused (the sender's tokens are not known without
    // asking Redis), /notify and a batch alike, as the README says.
    for (const answer of [
      await app.inject({
        method: 'POST',
        url: '/notify',
        headers: auth,
        payload: { userId: 'carol', payload: {} },
      }),
      await batch(app, [{ userId: 'carol', payload: {} }]),
    ]) {
      expect(answer.statusCode).toBe(429);
      expect(answer.headers['ratelimit-policy']).toMatch(/^"sender";q=\d+;w=\d+, "recipient";q=3;w=\d+$/);
      expect(answer.headers.ratelimit).toMatch(/^"recipient";r=0;t=\d+$/);
    }
  });
});

describe('POST /notify/batch over HTTP: every problem of an item rejects that item alone', () => {
  /** Sends `body` as it is (JSON text: lone surrogates and `__proto__` keys survive) to a listening gateway. */
  async function post(target: FastifyInstance, body: string) {
    const address = target.server.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    const response = await fetch(`http://127.0.0.1:${port}/notify/batch`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body,
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  }
  const item = (userId: string, payload = '{}') => `{"userId":"${userId}","payload":${payload}}`;
  const nested = (levels: number) => `${'['.repeat(levels)}${']'.repeat(levels)}`;

  it('an item that is no object, or that fails the checks of every body, is rejected alone with its own error', async () => {
    app = await buildTestApp();
    await app.listen({ port: 0, host: '127.0.0.1' });
    const items: [string, string | undefined][] = [
      [item('ok-1'), undefined],
      ['null', 'body.notifications.1'],
      ['"x"', 'body.notifications.2'],
      ['5', 'body.notifications.3'],
      ['[]', 'body.notifications.4'],
      [item('u', '{"s":"\\ud800"}'), 'body.notifications.5.payload.s'],
      [item('u', '{"__proto__":{"polluted":true}}'), 'body.notifications.6.payload.__proto__'],
      [
        item('u', '{"constructor":{"prototype":{"polluted":true}}}'),
        'body.notifications.7.payload.constructor.prototype',
      ],
      [item('u', '{"n":1e400}'), 'body.notifications.8.payload.n'],
      [item('u', '{"n":9007199254740993}'), 'body.notifications.9.payload.n'],
      [`{"__proto__":{"polluted":true},"userId":"u","payload":{}}`, 'body.notifications.10.__proto__'],
      [item('u', `{"a":${nested(70)}}`), 'body.notifications.11.payload.a'],
      // Deep enough to overflow any recursive walk of it: it must never reach one.
      [item('u', `{"a":${nested(20_000)}}`), 'body.notifications.12.payload.a'],
      [item('ok-2'), undefined],
    ];
    const response = await post(app, `{"notifications":[${items.map(([text]) => text).join(',')}]}`);
    expect(response.status, JSON.stringify(response.body).slice(0, 500)).toBe(202);
    expect(response.body).toMatchObject({ accepted: 2, rejected: items.length - 2 });
    const results = response.body.results as {
      index: number;
      status: string;
      code?: string;
      error?: string;
      details?: { field: string; message: string }[];
    }[];
    expect(results.map((result) => result.index)).toEqual(items.map((_, index) => index));
    items.forEach(([, field], index) => {
      const result = results[index];
      if (field === undefined) {
        expect(result?.status, `item ${index}`).toBe('queued');
        return;
      }
      expect(result, `item ${index}`).toMatchObject({ status: 'rejected', code: 'HERALD_ERR_VALIDATION' });
      const detail = result?.details?.[0];
      expect(detail?.field.startsWith(field), `item ${index}: ${detail?.field}`).toBe(true);
      expect(result?.error).toBe(`Invalid notification: ${detail?.field} ${detail?.message}`);
    });
    expect(results[1]?.details).toEqual([{ field: 'body.notifications.1', message: 'must be object' }]);
    expect(results[6]?.details).toEqual([
      { field: 'body.notifications.6.payload.__proto__', message: 'is not an accepted key' },
    ]);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    const jobs = await everyPartition(app).getJobs();
    expect(jobs.map((job) => job.data.userId).sort()).toEqual(['ok-1', 'ok-2']);
  });

  it('a batch of only such items is a 400 naming each; problems outside the items are still the whole body’s', async () => {
    app = await buildTestApp();
    await app.listen({ port: 0, host: '127.0.0.1' });
    const none = await post(app, `{"notifications":[null,${item('u', '{"s":"\\udc00"}')}]}`);
    expect(none.status).toBe(400);
    expect((none.body.details as { field: string }[]).map((detail) => detail.field)).toEqual([
      'body.notifications.0',
      'body.notifications.1.payload.s',
    ]);
    for (const [body, field] of [
      [`{"notifications":[${item('u')}],"x":"\\ud800"}`, 'body.x'],
      [`{"__proto__":{"polluted":true},"notifications":[${item('u')}]}`, 'body.__proto__'],
      [`{"notifications":"x"}`, 'body.notifications'],
      [`{"notifications":[]}`, 'body.notifications'],
      [
        `{"notifications":[${Array.from({ length: 101 }, () => item('u', '{"__proto__":1}')).join(',')}]}`,
        'body.notifications',
      ],
      [`{"notifications":[${item('u')}]`, 'body'],
      [`[${item('u')}]`, 'body'],
    ] as const) {
      const response = await post(app, body);
      expect(response.status, body.slice(0, 80)).toBe(400);
      expect(response.body.code).toBe('HERALD_ERR_VALIDATION');
      const first = (response.body.details as { field: string }[])[0]?.field ?? '';
      expect(first.startsWith(field), `${body.slice(0, 80)}: ${first}`).toBe(true);
    }
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(await everyPartition(app).count()).toBe(0);
  });
});
