import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { API_KEY_2, auth, buildTestApp, disposeTestApp } from './helpers.js';

let app: FastifyInstance | undefined;
afterEach(async () => {
  if (app) await disposeTestApp(app);
  app = undefined;
});

const notify = (target: FastifyInstance, userId: string, headers: Record<string, string> = auth) =>
  target.inject({ method: 'POST', url: '/notify', headers, payload: { userId, payload: {} } });

type Bucket = { burst: number; perSecond: number };
/** A gateway with these buckets per recipient (`HERALD_RATE_LIMIT_*`) and per sender (`HERALD_SENDER_RATE_LIMIT_*`). */
const buildLimitedApp = (recipient: Bucket, sender: Bucket) =>
  buildTestApp({
    HERALD_RATE_LIMIT_BURST: String(recipient.burst),
    HERALD_RATE_LIMIT_PER_SECOND: String(recipient.perSecond),
    HERALD_SENDER_RATE_LIMIT_BURST: String(sender.burst),
    HERALD_SENDER_RATE_LIMIT_PER_SECOND: String(sender.perSecond),
  });

describe('limits per sender and per recipient, in one decision', () => {
  it('sends the draft-11 RateLimit-Policy and RateLimit headers on every limited answer', async () => {
    app = await buildLimitedApp({ burst: 10, perSecond: 10 }, { burst: 200, perSecond: 100 });
    const response = await notify(app, 'headers-user');
    expect(response.statusCode).toBe(202);
    expect(response.headers['ratelimit-policy']).toBe('"sender";q=200;w=2, "recipient";q=10;w=1');
    expect(response.headers.ratelimit).toMatch(/^"sender";r=199;t=\d+, "recipient";r=9;t=\d+$/);
  });

  it('a request refused by the recipient limit takes nothing from the sender, and says which policy refused', async () => {
    app = await buildLimitedApp({ burst: 2, perSecond: 0.001 }, { burst: 5, perSecond: 0.001 });
    expect((await notify(app, 'busy')).statusCode).toBe(202);
    expect((await notify(app, 'busy')).statusCode).toBe(202);
    const refused = await notify(app, 'busy');
    expect(refused.statusCode).toBe(429);
    expect(refused.json()).toMatchObject({
      error: 'Rate limit exceeded',
      code: 'HERALD_ERR_RATE_LIMITED',
      policy: 'recipient',
    });
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // The sender spent 2 of 5: three more to other recipients pass, the fourth hits the sender limit.
    const statuses = [];
    for (const userId of ['a', 'b', 'c', 'd']) statuses.push((await notify(app, userId)).statusCode);
    expect(statuses).toEqual([202, 202, 202, 429]);
    const senderRefused = await notify(app, 'e');
    expect(senderRefused.json()).toMatchObject({ policy: 'sender' });
    // Another API key is another sender.
    expect((await notify(app, 'e', { authorization: `Bearer ${API_KEY_2}` })).statusCode).toBe(202);
  });

  it('a refused request answers from the local deny cache without another Redis decision', async () => {
    app = await buildTestApp({ HERALD_RATE_LIMIT_BURST: '1', HERALD_RATE_LIMIT_PER_SECOND: '0.01' });
    expect((await notify(app, 'flood')).statusCode).toBe(202);
    for (let i = 0; i < 20; i++) expect((await notify(app, 'flood')).statusCode).toBe(429);
    const metrics = (await app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(metrics).toMatch(/herald_ratelimit_decisions_total\{policy="recipient",outcome="denied"\} 1\b/);
    expect(metrics).toMatch(
      /herald_ratelimit_decisions_total\{policy="recipient",outcome="denied_locally"\} 19\b/,
    );
  });

  it('an API key over its sender limit is refused before its body is read: no parsing, no validation, no Redis', async () => {
    app = await buildTestApp({
      HERALD_SENDER_RATE_LIMIT_BURST: '1',
      HERALD_SENDER_RATE_LIMIT_PER_SECOND: '0.001',
    });
    expect((await notify(app, 'first')).statusCode).toBe(202);
    const byRedis = await notify(app, 'second');
    expect(byRedis.json()).toMatchObject({ policy: 'sender' });
    // From now on this key is answered in preParsing: a malformed body is a 429, not a 400, on both routes.
    const json = { ...auth, 'content-type': 'application/json' };
    for (const url of ['/notify', '/notify/batch']) {
      const early = await app.inject({ method: 'POST', url, headers: json, payload: '{"userId": nope' });
      expect(early.statusCode).toBe(429);
      expect(early.json()).toMatchObject({ code: 'HERALD_ERR_RATE_LIMITED', policy: 'sender' });
      expect(early.headers['ratelimit-policy']).toBe('"sender";q=1;w=1000, "recipient";q=10;w=1');
      expect(early.headers.ratelimit).toMatch(/^"sender";r=0;t=\d+$/);
      expect(Number(early.headers['retry-after'])).toBeGreaterThan(900);
    }
    // Another key's malformed body still gets its 400 naming the problem.
    const other = await app.inject({
      method: 'POST',
      url: '/notify',
      headers: { authorization: `Bearer ${API_KEY_2}`, 'content-type': 'application/json' },
      payload: '{"userId": nope',
    });
    expect(other.statusCode).toBe(400);
    const metrics = (await app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(metrics).toMatch(/herald_ratelimit_decisions_total\{policy="sender",outcome="denied"\} 1\b/);
    expect(metrics).toMatch(
      /herald_ratelimit_decisions_total\{policy="sender",outcome="denied_locally"\} 2\b/,
    );
  });
});
