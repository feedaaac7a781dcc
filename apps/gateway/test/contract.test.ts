import { randomId } from '@herald/testing';
import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { auth, buildTestApp, disposeTestApp, everyPartition } from './helpers.js';

let app: FastifyInstance | undefined;
afterEach(async () => {
  if (app) await disposeTestApp(app);
  app = undefined;
});

const notify = (target: FastifyInstance, userId: string, headers: Record<string, string> = {}) =>
  target.inject({
    method: 'POST',
    url: '/notify',
    headers: { ...auth, ...headers },
    payload: { userId, payload: {} },
  });

describe('the contract, as a user reads it', () => {
  it('a retry with its Idempotency-Key gets the stored answer even when the sender is now over its limit', async () => {
    app = await buildTestApp({
      HERALD_SENDER_RATE_LIMIT_BURST: '1',
      HERALD_SENDER_RATE_LIMIT_PER_SECOND: '0.001',
    });
    const key = randomId('idem');
    const first = await notify(app, 'idem-over', { 'idempotency-key': key });
    expect(first.statusCode).toBe(202);
    // The sender is now out of tokens, and refused (twice: the second refusal comes from the deny cache).
    expect((await notify(app, 'other')).statusCode).toBe(429);
    expect((await notify(app, 'other')).statusCode).toBe(429);
    const retry = await notify(app, 'idem-over', { 'idempotency-key': key });
    expect(retry.statusCode, retry.body).toBe(202);
    expect(retry.headers['idempotency-replayed']).toBe('true');
    expect(retry.json()).toEqual(first.json());
    // A new key from that sender is still refused.
    expect((await notify(app, 'idem-over', { 'idempotency-key': randomId('idem') })).statusCode).toBe(429);
  });

  it('a batch that asks one recipient for more than its burst is a documented 400 that says it can never pass', async () => {
    app = await buildTestApp({ HERALD_RATE_LIMIT_BURST: '3', HERALD_SENDER_RATE_LIMIT_BURST: '1000' });
    const response = await app.inject({
      method: 'POST',
      url: '/notify/batch',
      headers: auth,
      payload: { notifications: Array.from({ length: 4 }, (_, n) => ({ userId: 'greedy', payload: { n } })) },
    });
    expect(response.statusCode).toBe(400);
    expect(response.headers['retry-after']).toBeUndefined();
    expect(response.json()).toMatchObject({
      code: 'HERALD_ERR_BATCH_EXCEEDS_BURST',
      policy: 'recipient',
      cost: 4,
      capacity: 3,
    });
    expect(response.json<{ error: string }>().error).toMatch(/never/);
    expect(await everyPartition(app).count()).toBe(0);
  });

  it("on 429, Retry-After is never shorter than the t of the RateLimit header's refusing policy", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          burst: fc.integer({ min: 1, max: 20 }),
          perSecond: fc.constantFrom(0.01, 0.1, 0.3, 1, 3, 7, 50),
          senderBurst: fc.integer({ min: 1, max: 40 }),
          senderPerSecond: fc.constantFrom(0.05, 0.5, 2, 100),
          batch: fc.integer({ min: 1, max: 5 }),
        }),
        async ({ burst, perSecond, senderBurst, senderPerSecond, batch }) => {
          const target = await buildTestApp({
            HERALD_RATE_LIMIT_BURST: String(burst),
            HERALD_RATE_LIMIT_PER_SECOND: String(perSecond),
            HERALD_SENDER_RATE_LIMIT_BURST: String(senderBurst),
            HERALD_SENDER_RATE_LIMIT_PER_SECOND: String(senderPerSecond),
          });
          try {
            let refusals = 0;
            for (let i = 0; i < 60 && refusals < 3; i++) {
              const response =
                batch === 1
                  ? await notify(target, 'prop')
                  : await target.inject({
                      method: 'POST',
                      url: '/notify/batch',
                      headers: auth,
                      payload: {
                        notifications: Array.from({ length: Math.min(batch, burst, senderBurst) }, () => ({
                          userId: 'prop',
                          payload: {},
                        })),
                      },
                    });
              if (response.statusCode !== 429) continue;
              refusals++;
              const { policy } = response.json<{ policy: string }>();
              const item = String(response.headers.ratelimit)
                .split(', ')
                .find((part) => part.startsWith(`"${policy}";`));
              const t = Number(/;t=(\d+)/.exec(item ?? '')?.[1]);
              expect(Number.isInteger(t), String(response.headers.ratelimit)).toBe(true);
              expect(Number(response.headers['retry-after'])).toBeGreaterThanOrEqual(t);
            }
          } finally {
            await disposeTestApp(target);
          }
        },
      ),
      { numRuns: 25 },
    );
  });

  it('/openapi.json: public routes need no key, every Herald header is documented, Try it out schedules nothing', async () => {
    app = await buildTestApp();
    type Operation = {
      security?: unknown[];
      responses: Record<string, { headers?: Record<string, unknown> }>;
      requestBody?: { content: Record<string, { example?: Record<string, unknown> }> };
    };
    const document = (await app.inject({ method: 'GET', url: '/openapi.json' })).json<{
      security: unknown[];
      paths: Record<string, Record<string, Operation>>;
    }>();
    for (const path of ['/healthz', '/readyz', '/metrics'])
      expect(document.paths[path]?.get?.security, path).toEqual([]);
    expect(document.security).toEqual([{ apiKey: [] }]);
    const notify = document.paths['/notify']?.post as Operation;
    expect(notify.security).toBeUndefined();
    expect(Object.keys(notify.responses['202']?.headers ?? {})).toEqual(
      expect.arrayContaining(['Idempotency-Replayed', 'RateLimit', 'RateLimit-Policy']),
    );
    expect(Object.keys(notify.responses['429']?.headers ?? {})).toEqual(
      expect.arrayContaining(['Retry-After', 'RateLimit', 'RateLimit-Policy']),
    );
    expect(Object.keys(notify.responses['401']?.headers ?? {})).toContain('WWW-Authenticate');
    const example = notify.requestBody?.content['application/json']?.example ?? {};
    expect(example).toMatchObject({ userId: 'alice' });
    expect(Object.keys(example).sort()).toEqual(['payload', 'userId']);
    // The example, sent as it is, is accepted and due at once.
    const sent = await app.inject({ method: 'POST', url: '/notify', headers: auth, payload: example });
    expect(sent.statusCode).toBe(202);
    const job = await everyPartition(app).getJob(sent.json<{ id: string }>().id);
    expect(job?.opts.delay ?? 0).toBe(0);
  });
});
