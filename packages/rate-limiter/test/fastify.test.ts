import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import { describe, expect, it } from 'vitest';
import { heraldRateLimit, RateLimitedError } from '../src/fastify.js';
import { CostExceedsCapacityError, RateLimiter } from '../src/index.js';
import { connectRedisForFile, onCluster, randomPrefix } from './support/redis.js';

// The Fastify plugin on a bare app, through inject(). The plugin writes no error body: it throws its
// refusals, and the app's error handler answers them (here, as the gateway's does).

/** A bare Fastify app whose error handler answers the plugin's refusals. */
function appWithErrorHandler(): FastifyInstance {
  const fastify = Fastify();
  fastify.setErrorHandler((error, _request, reply) => {
    if (error instanceof RateLimitedError) {
      const { policy, retryAfterMs } = error.result;
      return reply
        .code(error.statusCode)
        .header('Retry-After', String(error.retryAfterSeconds))
        .send({ error: error.message, code: error.code, policy, retryAfterMs });
    }
    if (error instanceof CostExceedsCapacityError) {
      const { message, code, policy, cost, capacity } = error;
      return reply.code(error.statusCode).send({ error: message, code, policy, cost, capacity });
    }
    return reply.send(error);
  });
  return fastify;
}

const redis = await connectRedisForFile();

async function app(limiter: RateLimiter, fastify = appWithErrorHandler()): Promise<FastifyInstance> {
  await fastify.register(heraldRateLimit, { limiter });
  fastify.post<{ Body: { userId: string; weight?: number } }>(
    '/notify',
    {
      config: {
        rateLimit: {
          key: (request) => ({
            apiKey: String(request.headers['x-api-key']),
            recipient: (request.body as { userId: string }).userId,
          }),
          cost: (request) => (request.body as { weight?: number }).weight ?? 1,
        },
      },
    },
    async (_request, reply) => reply.code(202).send({ status: 'queued' }),
  );
  fastify.get('/free', async () => ({ ok: true }));
  return fastify;
}

function limiter(): RateLimiter {
  return new RateLimiter({
    redis,
    keyPrefix: randomPrefix(),
    policies: [
      { name: 'apiKey', capacity: 100, ratePerSecond: 0.01 },
      { name: 'recipient', capacity: 2, ratePerSecond: 0.2 },
    ],
  });
}

describe('heraldRateLimit (Fastify plugin)', () => {
  it('sets the draft-11 headers, answers 429 with Retry-After and the JSON body, and leaves other routes alone', async () => {
    const fastify = await app(limiter());
    const send = (userId: string, weight?: number) =>
      fastify.inject({
        method: 'POST',
        url: '/notify',
        headers: { 'x-api-key': 'key-7' },
        payload: weight === undefined ? { userId } : { userId, weight },
      });

    const ok = await send('user-1');
    expect(ok.statusCode).toBe(202);
    expect(ok.headers['ratelimit-policy']).toBe('"apiKey";q=100;w=10000, "recipient";q=2;w=10');
    // t: whole seconds until full (1 token at 0.01/s = 100 s; 1 at 0.2/s = 5 s), rounded up.
    expect(ok.headers.ratelimit).toMatch(/^"apiKey";r=99;t=(99|100), "recipient";r=1;t=[45]$/);

    expect((await send('user-1')).statusCode).toBe(202);
    const denied = await send('user-1');
    expect(denied.statusCode).toBe(429);
    expect(denied.headers['retry-after']).toMatch(/^[45]$/);
    expect(denied.json()).toEqual({
      error: 'Rate limit exceeded',
      code: 'HERALD_ERR_RATE_LIMITED',
      policy: 'recipient',
      retryAfterMs: expect.any(Number),
    });
    expect(denied.json().retryAfterMs).toBeGreaterThan(4000);
    expect(denied.json().retryAfterMs).toBeLessThanOrEqual(5000);
    expect(denied.headers.ratelimit).toMatch(/"recipient";r=0;t=\d+/);

    // Another recipient under the same key still goes through, with a weight.
    const weighted = await send('user-2', 2);
    expect(weighted.statusCode).toBe(202);
    expect(weighted.headers.ratelimit).toMatch(/^"apiKey";r=96;t=(399|400), "recipient";r=0;t=(9|10)$/);

    const free = await fastify.inject({ method: 'GET', url: '/free' });
    expect(free.statusCode).toBe(200);
    expect(free.headers.ratelimit).toBeUndefined();
    await fastify.close();
  });

  it("writes no error body of its own: under Fastify's default error handler a denial is a plain 429", async () => {
    const fastify = await app(limiter(), Fastify());
    const send = () =>
      fastify.inject({
        method: 'POST',
        url: '/notify',
        headers: { 'x-api-key': 'key-8' },
        payload: { userId: 'u' },
      });
    expect((await send()).statusCode).toBe(202);
    expect((await send()).statusCode).toBe(202);
    const denied = await send();
    expect(denied.statusCode).toBe(429);
    expect(denied.headers.ratelimit).toMatch(/"recipient";r=0;t=\d+/);
    expect(denied.json()).toMatchObject({ statusCode: 429, code: 'HERALD_ERR_RATE_LIMITED' });
    expect(denied.json().policy).toBeUndefined();
    await fastify.close();
  });

  it('answers a cost above capacity with 400 and its code, not a 429', async () => {
    const fastify = await app(limiter());
    const response = await fastify.inject({
      method: 'POST',
      url: '/notify',
      headers: { 'x-api-key': 'key-7' },
      payload: { userId: 'user-1', weight: 3 },
    });
    expect(response.statusCode).toBe(400);
    expect(response.json()).toMatchObject({
      code: 'HERALD_ERR_RATE_LIMITER_COST_EXCEEDS_CAPACITY',
      policy: 'recipient',
    });
    await fastify.close();
  });

  it('picks the limiter per request when `limiter` is a function (sync or async), and limits a batch', async () => {
    const prefix = randomPrefix();
    // Two API keys with their own limits; the same Redis keys whichever limiter reads them.
    const make = (senderCapacity: number) =>
      new RateLimiter({
        redis,
        keyPrefix: prefix,
        policies: [
          { name: 'sender', capacity: senderCapacity, ratePerSecond: 0.01 },
          { name: 'recipient', capacity: 2, ratePerSecond: 0.01 },
        ],
        ...(onCluster() ? { hashTag: 'fastify-batch' } : {}),
      });
    const small = make(3);
    const big = make(50);
    const chosen: string[] = [];
    const fastify = appWithErrorHandler();
    await fastify.register(heraldRateLimit, { limiter: big });
    const key = (request: FastifyRequest) => String(request.headers['x-api-key']);
    const recipients = (request: FastifyRequest) => (request.body as { userIds: string[] }).userIds;
    fastify.post(
      '/batch',
      {
        config: {
          rateLimit: {
            limiter: (request) => {
              chosen.push(key(request));
              return key(request) === 'small' ? small : big;
            },
            key: (request) => ({ sender: key(request), recipient: recipients(request) }),
            cost: (request) => ({ sender: recipients(request).length, recipient: 1 }),
          },
        },
      },
      async (_request, reply) => reply.code(202).send({ status: 'queued' }),
    );
    fastify.post(
      '/async',
      {
        config: {
          rateLimit: {
            limiter: async () => small,
            key: (request) => ({ sender: `async-${key(request)}`, recipient: 'someone' }),
          },
        },
      },
      async (_request, reply) => reply.code(202).send({ status: 'queued' }),
    );
    const send = (apiKey: string, userIds: string[], url = '/batch') =>
      fastify.inject({ method: 'POST', url, headers: { 'x-api-key': apiKey }, payload: { userIds } });

    const ok = await send('small', ['u1', 'u2']);
    expect(ok.statusCode).toBe(202);
    expect(ok.headers['ratelimit-policy']).toBe('"sender";q=3;w=300, "recipient";q=2;w=200');
    // One entry per policy: the sender, and the recipient with the fewest tokens left.
    expect(ok.headers.ratelimit).toMatch(/^"sender";r=1;t=\d+, "recipient";r=1;t=\d+$/);
    // 2 more recipients exceed the small key's sender bucket (1 left); nothing is taken.
    const denied = await send('small', ['u3', 'u4']);
    expect(denied.statusCode).toBe(429);
    expect(denied.json()).toMatchObject({ code: 'HERALD_ERR_RATE_LIMITED', policy: 'sender' });
    // The big key's limiter on the same recipients: u3 and u4 were untouched by the refused batch.
    const bigOk = await send('big', ['u3', 'u4', 'u3']);
    expect(bigOk.statusCode).toBe(202);
    expect(bigOk.headers['ratelimit-policy']).toBe('"sender";q=50;w=5000, "recipient";q=2;w=200');
    expect(bigOk.headers.ratelimit).toMatch(/^"sender";r=47;t=\d+, "recipient";r=0;t=\d+$/);
    // u3 is empty now: refused, and the recipient policy names it.
    const recipientDenied = await send('big', ['u1', 'u3']);
    expect(recipientDenied.statusCode).toBe(429);
    expect(recipientDenied.json()).toMatchObject({ policy: 'recipient' });
    expect(chosen).toEqual(['small', 'small', 'big', 'big']);

    const viaAsync = await send('x', [], '/async');
    expect(viaAsync.statusCode).toBe(202);
    expect(viaAsync.headers['ratelimit-policy']).toBe('"sender";q=3;w=300, "recipient";q=2;w=200');
    await fastify.close();
  });
});

describe('precheck and deniedLocally: a denied caller is refused before its body is read', () => {
  function oneKeyLimiter(): RateLimiter {
    return new RateLimiter({
      redis,
      keyPrefix: randomPrefix(),
      policies: [{ name: 'apiKey', capacity: 1, ratePerSecond: 0.001 }],
    });
  }

  it('deniedLocally answers from the deny cache only, for the ids it is given', async () => {
    const limiter = oneKeyLimiter();
    expect(limiter.deniedLocally({ apiKey: 'k' })).toBeUndefined(); // never denied: nothing known
    expect((await limiter.consume('k')).allowed).toBe(true);
    expect(limiter.deniedLocally({ apiKey: 'k' })).toBeUndefined(); // allowed calls are not cached
    expect((await limiter.consume('k')).allowed).toBe(false); // Redis denies: now cached
    const denied = limiter.deniedLocally({ apiKey: 'k' });
    expect(denied).toMatchObject({ allowed: false, source: 'deny-cache', policy: 'apiKey', deniedId: 'k' });
    expect(denied?.retryAfterMs).toBeGreaterThan(900_000);
    expect(limiter.deniedLocally({ apiKey: 'other' })).toBeUndefined();
    expect(limiter.deniedLocally({})).toBeUndefined();
    expect(() => limiter.deniedLocally({ nope: 'k' })).toThrow(/No policy is named "nope"/);
    expect(limiter.metrics().apiKey).toMatchObject({ allowed: 1, denied: 1, deniedLocally: 1 });
    // After a reset the key is not denied locally any more.
    await limiter.reset('k');
    expect(limiter.deniedLocally({ apiKey: 'k' })).toBeUndefined();
  });

  it('answers 429 with the draft-11 headers in preParsing: a malformed body from a denied key is never parsed', async () => {
    const limiter = oneKeyLimiter();
    const fastify = appWithErrorHandler();
    await fastify.register(heraldRateLimit, { limiter });
    const keyOf = (request: FastifyRequest) => String(request.headers['x-api-key']);
    let handled = 0;
    fastify.post(
      '/notify',
      {
        config: { rateLimit: { key: keyOf, precheck: (request) => ({ apiKey: keyOf(request) }) } },
        schema: {
          body: { type: 'object', required: ['userId'], properties: { userId: { type: 'string' } } },
        },
      },
      async (_request, reply) => {
        handled++;
        return reply.code(202).send({ status: 'queued' });
      },
    );
    const send = (apiKey: string, payload: string) =>
      fastify.inject({
        method: 'POST',
        url: '/notify',
        headers: { 'x-api-key': apiKey, 'content-type': 'application/json' },
        payload,
      });

    expect((await send('flood', '{"userId":"u"}')).statusCode).toBe(202);
    // Redis denies the second call, in preHandler (after parsing and validation) …
    expect((await send('flood', '{"userId":"u"}')).statusCode).toBe(429);
    // … and from then on the key is refused before its body is read: malformed JSON is a 429, not a 400.
    const early = await send('flood', '{"userId": not json');
    expect(early.statusCode).toBe(429);
    expect(early.json()).toMatchObject({ code: 'HERALD_ERR_RATE_LIMITED', policy: 'apiKey' });
    expect(early.headers['ratelimit-policy']).toBe('"apiKey";q=1;w=1000');
    expect(early.headers.ratelimit).toMatch(/^"apiKey";r=0;t=\d+$/);
    expect(Number(early.headers['retry-after'])).toBeGreaterThan(900);
    // Another key's malformed body is parsed as usual (400), and its valid one passes.
    expect((await send('other', '{"userId": not json')).statusCode).toBe(400);
    expect((await send('other', '{"userId":"u"}')).statusCode).toBe(202);
    expect(handled).toBe(2);
    expect(limiter.metrics().apiKey).toMatchObject({ denied: 1, deniedLocally: 1 });
    await fastify.close();
  });

  it("runs the precheck before the route's own preParsing hooks: a denied key never reaches them", async () => {
    const limiter = oneKeyLimiter();
    const fastify = appWithErrorHandler();
    await fastify.register(heraldRateLimit, { limiter });
    const keyOf = (request: FastifyRequest) => String(request.headers['x-api-key']);
    const reached: string[] = [];
    fastify.post(
      '/notify',
      {
        config: { rateLimit: { key: keyOf, precheck: (request) => ({ apiKey: keyOf(request) }) } },
        // E.g. the gateway's count of requests in flight: a denied flood should not pay for it.
        preParsing: (request, _reply, payload, done) => {
          reached.push(keyOf(request));
          done(null, payload);
        },
      },
      async (_request, reply) => reply.code(202).send({ status: 'queued' }),
    );
    const send = (apiKey: string) =>
      fastify.inject({
        method: 'POST',
        url: '/notify',
        headers: { 'x-api-key': apiKey, 'content-type': 'application/json' },
        payload: '{"userId":"u"}',
      });
    expect((await send('flood')).statusCode).toBe(202);
    expect((await send('flood')).statusCode).toBe(429); // denied by Redis: now in the deny cache
    for (let i = 0; i < 3; i++) expect((await send('flood')).statusCode).toBe(429);
    expect((await send('other')).statusCode).toBe(202);
    expect(reached).toEqual(['flood', 'flood', 'other']);
    expect(limiter.metrics().apiKey).toMatchObject({ deniedLocally: 3 });
    await fastify.close();
  });
});

describe('onDenied: the app answers denials itself, with no error thrown', () => {
  it('answers through onDenied in preHandler and in the precheck, with the draft-11 headers, never reaching the error handler', async () => {
    const fastify = Fastify();
    let errorHandlerCalls = 0;
    fastify.setErrorHandler((error, _request, reply) => {
      errorHandlerCalls++;
      return reply.send(error);
    });
    const denied: RateLimitedError[] = [];
    const limiter = new RateLimiter({
      redis,
      keyPrefix: randomPrefix(),
      policies: [{ name: 'apiKey', capacity: 1, ratePerSecond: 0.001 }],
    });
    await fastify.register(heraldRateLimit, {
      limiter,
      onDenied: (reply, error) => {
        denied.push(error);
        void reply.code(error.statusCode).header('Retry-After', String(error.retryAfterSeconds)).send({
          refused: error.result.policy,
        });
      },
    });
    const keyOf = (request: FastifyRequest) => String(request.headers['x-api-key']);
    fastify.post(
      '/notify',
      { config: { rateLimit: { key: keyOf, precheck: (request) => ({ apiKey: keyOf(request) }) } } },
      async (_request, reply) => reply.code(202).send({ status: 'queued' }),
    );
    const send = (payload: string) =>
      fastify.inject({
        method: 'POST',
        url: '/notify',
        headers: { 'x-api-key': 'flood', 'content-type': 'application/json' },
        payload,
      });

    expect((await send('{"userId":"u"}')).statusCode).toBe(202);
    // Denied by Redis in preHandler: onDenied answers.
    const late = await send('{"userId":"u"}');
    expect(late.statusCode).toBe(429);
    expect(late.json()).toEqual({ refused: 'apiKey' });
    expect(late.headers['ratelimit-policy']).toBe('"apiKey";q=1;w=1000');
    expect(late.headers.ratelimit).toMatch(/^"apiKey";r=0;t=\d+$/);
    expect(Number(late.headers['retry-after'])).toBeGreaterThan(900);
    // Denied by the deny cache in preParsing: onDenied answers, and the malformed body is never parsed.
    const early = await send('{"userId": not json');
    expect(early.statusCode).toBe(429);
    expect(early.json()).toEqual({ refused: 'apiKey' });
    expect(early.headers.ratelimit).toMatch(/^"apiKey";r=0;t=\d+$/);
    expect(denied.map((error) => error.statusCode)).toEqual([429, 429]);
    expect(errorHandlerCalls).toBe(0);
    await fastify.close();
  });

  it('hands a throwing key function to the error handler, synchronously or asynchronously', async () => {
    const fastify = appWithErrorHandler();
    await fastify.register(heraldRateLimit, { limiter: limiter() });
    for (const [url, key] of [
      [
        '/sync',
        () => {
          throw new Error('no key');
        },
      ],
      [
        '/async',
        async () => {
          throw new Error('no key');
        },
      ],
    ] as const) {
      fastify.get(url, { config: { rateLimit: { key } } }, async () => ({ ok: true }));
    }
    for (const url of ['/sync', '/async']) {
      const response = await fastify.inject({ method: 'GET', url });
      expect(response.statusCode).toBe(500);
      expect(response.json()).toMatchObject({ message: 'no key' });
    }
    await fastify.close();
  });
});
