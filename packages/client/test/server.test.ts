import { createServer, type RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';
import { waitFor } from '@herald/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tokenClaims } from '../src/index.js';
import { createHeraldServer, HeraldApiError } from '../src/server.js';
import { API_KEY, randomId, Stack } from './support/stack.js';

/**
 * Runs `test` against a gateway stand-in over real HTTP on a free port of 127.0.0.1 that answers with
 * `handler`; the stand-in is closed after, its open connections too.
 */
async function withStandIn(handler: RequestListener, test: (url: string) => Promise<void>): Promise<void> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    await test(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  } finally {
    server.closeAllConnections();
    server.close();
  }
}

describe('@herald/client/server against a real gateway, worker and Redis', () => {
  const stack = new Stack({ HERALD_RATE_LIMIT_BURST: '1', HERALD_RATE_LIMIT_PER_SECOND: '1' });
  let url = '';
  beforeAll(async () => {
    const [gateway] = await Promise.all([stack.start('gateway', 'gateway'), stack.start('worker', 'worker')]);
    url = gateway.url;
  });
  afterAll(() => stack.dispose());

  it('notify with a generated Idempotency-Key; the same key again is a replay, not a second send', async () => {
    const herald = createHeraldServer({ url, apiKey: API_KEY });
    const user = randomId('alice');
    const sent = await herald.notify({ userId: user, payload: { title: 'Hello' } });
    expect(sent).toMatchObject({ status: 'queued', replayed: false });
    expect(sent.idempotencyKey).toMatch(/^[0-9a-f-]{36}$/);
    const again = await herald.notify({
      userId: user,
      payload: { title: 'Hello' },
      idempotencyKey: sent.idempotencyKey,
    });
    expect(again).toMatchObject({ id: sent.id, replayed: true });

    await waitFor(async () => (await herald.inbox.list(user)).items.length === 1, { what: 'in the inbox' });
    const page = await herald.inbox.list(user, { limit: 10 });
    expect(page.items.map((item) => item.id)).toEqual([sent.id]);
    expect(page.unread.count).toBe(1);
    expect(await herald.inbox.markRead(user, { all: true })).toMatchObject({
      changed: 1,
      unread: { count: 0 },
    });
    expect(await herald.status(sent.id)).toMatchObject({ id: sent.id, userId: user });
    expect(await herald.status('no-such-notification')).toBeUndefined();
  });

  it('users "." and ".." are refused by name: no URL could reach their inbox (fetch resolves them as dot segments)', async () => {
    const herald = createHeraldServer({ url, apiKey: API_KEY });
    for (const user of ['.', '..']) {
      expect(
        await herald.notify({ userId: user, payload: {} }).catch((error: unknown) => error),
      ).toMatchObject({
        status: 400,
        code: 'HERALD_ERR_VALIDATION',
      });
    }
  });

  it('honours Retry-After on a 429 (the recipient allows 1/s): the retry passes', async () => {
    const herald = createHeraldServer({ url, apiKey: API_KEY, retries: 2 });
    const user = randomId('bob');
    await herald.notify({ userId: user, payload: { n: 1 } });
    const second = await herald.notify({ userId: user, payload: { n: 2 } });
    expect(second.status).toBe('queued');
    const noRetry = createHeraldServer({ url, apiKey: API_KEY, retries: 0 });
    const refused = await noRetry
      .notify({ userId: user, payload: { n: 3 } })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(HeraldApiError);
    expect(refused).toMatchObject({ status: 429, code: 'HERALD_ERR_RATE_LIMITED' });
    expect((refused as HeraldApiError).retryAfterMs).toBeGreaterThan(0);
  });

  it('notifyBatch, createToken; typed errors carry the gateway’s code', async () => {
    const herald = createHeraldServer({ url, apiKey: API_KEY });
    const batch = await herald.notifyBatch([
      { userId: randomId('c'), payload: { n: 1 } },
      { userId: 'bad user id with spaces', payload: {} },
    ]);
    expect(batch).toMatchObject({ accepted: 1, rejected: 1 });
    const { token, expiresAt } = await herald.createToken('carol');
    expect(tokenClaims(token)).toMatchObject({ sub: 'carol', tid: 'default' });
    expect(Date.parse(expiresAt)).toBeGreaterThan(Date.now());

    const invalid = await herald.notify({ userId: '', payload: {} }).catch((error: unknown) => error);
    expect(invalid).toMatchObject({ status: 400, code: 'HERALD_ERR_VALIDATION' });
    const wrongKey = createHeraldServer({ url, apiKey: 'not-a-key-0123456789abcdef0123456789' });
    expect(await wrongKey.createToken('x').catch((error: unknown) => error)).toMatchObject({
      status: 401,
      code: 'HERALD_ERR_UNAUTHORIZED',
    });
  });

  it('retries a 503 with Retry-After under the same Idempotency-Key; without retries the error says maybeAccepted', async () => {
    // A gateway stand-in over real HTTP that answers like a gateway whose Redis stalled twice.
    const keys: (string | undefined)[] = [];
    await withStandIn(
      (request, response) => {
        keys.push(request.headers['idempotency-key'] as string | undefined);
        request.resume();
        if (keys.length <= 2) {
          response.writeHead(503, { 'content-type': 'application/json', 'retry-after': '0' });
          response.end(
            JSON.stringify({ error: 'Redis slow', code: 'HERALD_ERR_UNAVAILABLE', maybeAccepted: true }),
          );
          return;
        }
        response.writeHead(202, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ id: 'n-1', status: 'queued' }));
      },
      async (standIn) => {
        const herald = createHeraldServer({ url: standIn, apiKey: API_KEY });
        const sent = await herald.notify({ userId: 'dave', payload: {} });
        expect(sent).toMatchObject({ id: 'n-1', replayed: false });
        expect(keys).toHaveLength(3);
        expect(new Set(keys)).toEqual(new Set([sent.idempotencyKey]));

        keys.length = 0;
        const once = createHeraldServer({ url: standIn, apiKey: API_KEY, retries: 0 });
        const error = await once
          .notify({ userId: 'dave', payload: {}, idempotencyKey: 'k-1' })
          .catch((e: unknown) => e);
        expect(error).toMatchObject({
          status: 503,
          code: 'HERALD_ERR_UNAVAILABLE',
          maybeAccepted: true,
          idempotencyKey: 'k-1',
          retryAfterMs: 0,
        });
      },
    );
  });
  it('refuses options it cannot work with before any request: a url without http(s)://, a missing apiKey', async () => {
    let requests = 0;
    const spy: typeof fetch = async (...args) => {
      requests++;
      return fetch(...args);
    };
    const bad = [
      [{ url: 'localhost:3000', apiKey: API_KEY }, /url must be an http:\/\/ or https:\/\/ address/],
      [{ url: 'not a url', apiKey: API_KEY }, /url must be an http:\/\/ or https:\/\/ address/],
      // The README's `apiKey: process.env.HERALD_API_KEY`, unset: it sent "Bearer undefined". (Written
      // as the README does: its type refused it, string | undefined for a string.)
      [{ url, apiKey: process.env.HERALD_SDK_TEST_UNSET_KEY }, /apiKey must be a non-empty string/],
      [{ url, apiKey: API_KEY, retries: -1 }, /retries must be a whole number ≥ 0/],
    ] as const;
    for (const [options, message] of bad) {
      let error: unknown;
      try {
        createHeraldServer({ ...options, fetch: spy });
      } catch (thrown) {
        error = thrown;
      }
      expect(error).toBeInstanceOf(HeraldApiError);
      expect(error).toMatchObject({ code: 'HERALD_ERR_VALIDATION', status: 0 });
      expect((error as Error).message).toMatch(message);
    }
    expect(requests).toBe(0);
  });

  it("a 2xx that is not a gateway's JSON (a proxy's page) is an error saying the send may have happened, never an answer without an id", async () => {
    await withStandIn(
      (request, response) => {
        request.resume();
        response.writeHead(200, { 'content-type': 'text/html' });
        response.end('<html>captive portal</html>');
      },
      async (standIn) => {
        const herald = createHeraldServer({ url: standIn, apiKey: API_KEY });
        const error = await herald
          .notify({ userId: 'erin', payload: {}, idempotencyKey: 'k-html' })
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(HeraldApiError);
        expect(error).toMatchObject({
          status: 200,
          code: 'HERALD_ERR_BAD_RESPONSE',
          maybeAccepted: true,
          idempotencyKey: 'k-html',
        });
        expect((error as Error).message).toMatch(/not Herald's JSON/);
        expect(await herald.inbox.list('erin').catch((e: unknown) => e)).toMatchObject({
          code: 'HERALD_ERR_BAD_RESPONSE',
          maybeAccepted: false,
        });
      },
    );
  });
  it('an answer whose body never ends (headers sent, then nothing) is a HERALD_ERR_NETWORK after the timeout, retried, saying the send may have happened', async () => {
    let requests = 0;
    await withStandIn(
      (request, response) => {
        requests++;
        request.resume();
        response.writeHead(202, { 'content-type': 'application/json' });
        response.write('{"id":');
      },
      async (standIn) => {
        const herald = createHeraldServer({ url: standIn, apiKey: API_KEY, timeoutMs: 200, retries: 1 });
        const error = await herald
          .notify({ userId: 'erin', payload: {}, idempotencyKey: 'k-trickle' })
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(HeraldApiError);
        expect(error).toMatchObject({
          status: 0,
          code: 'HERALD_ERR_NETWORK',
          maybeAccepted: true,
          idempotencyKey: 'k-trickle',
        });
        expect(requests).toBe(2);
      },
    );
  });

  it('status() is undefined only for a notification the gateway does not know: a 404 of a wrong url or of a proxy is an error', async () => {
    const herald = createHeraldServer({ url, apiKey: API_KEY });
    expect(await herald.status('no-such-notification')).toBeUndefined();
    // The gateway behind a path it does not serve (a base url with a prefix): every status was
    // undefined, as if no notification existed, while notify() failed.
    const prefixed = createHeraldServer({ url: `${url}/herald`, apiKey: API_KEY });
    const wrongPath = await prefixed.status('no-such-notification').catch((e: unknown) => e);
    expect(wrongPath).toBeInstanceOf(HeraldApiError);
    expect(wrongPath).toMatchObject({ status: 404, code: 'HERALD_ERR_NOT_FOUND' });
    expect((wrongPath as Error).message).toMatch(/No route GET \/herald\/notifications/);
    // A proxy's own 404 page.
    await withStandIn(
      (request, response) => {
        request.resume();
        response.writeHead(404, { 'content-type': 'text/html' });
        response.end('<html>not here</html>');
      },
      async (standIn) => {
        const proxied = createHeraldServer({ url: standIn, apiKey: API_KEY });
        expect(await proxied.status('n-1').catch((e: unknown) => e)).toMatchObject({
          status: 404,
          code: 'HERALD_ERR_HTTP_404',
        });
      },
    );
  });

  it('a send whose retries end on a refusal still says maybeAccepted when an earlier attempt may have landed', async () => {
    // A gateway stand-in over real HTTP: the first attempt gets no answer (the connection dropped
    // after the request arrived), the next ones are told the key is still in flight, or a 503.
    let attempts = 0;
    let then: 'in-flight' | 'unavailable' = 'in-flight';
    await withStandIn(
      (request, response) => {
        attempts++;
        request.resume();
        if (attempts === 1) {
          request.socket.destroy();
          return;
        }
        if (then === 'in-flight') {
          response.writeHead(409, { 'content-type': 'application/json', 'retry-after': '0' });
          response.end(
            JSON.stringify({ error: 'still being processed', code: 'HERALD_ERR_IDEMPOTENCY_IN_FLIGHT' }),
          );
          return;
        }
        response.writeHead(503, { 'content-type': 'application/json', 'retry-after': '0' });
        response.end(JSON.stringify({ error: 'Redis unreachable', code: 'HERALD_ERR_UNAVAILABLE' }));
      },
      async (standIn) => {
        const herald = createHeraldServer({ url: standIn, apiKey: API_KEY, retries: 2 });
        for (const answer of ['in-flight', 'unavailable'] as const) {
          attempts = 0;
          then = answer;
          const error = await herald
            .notify({ userId: 'frank', payload: {}, idempotencyKey: `k-${answer}` })
            .catch((e: unknown) => e);
          expect(attempts).toBe(3);
          // It said maybeAccepted: false, inviting a send under a new key: a second notification.
          expect(error).toMatchObject({ idempotencyKey: `k-${answer}`, maybeAccepted: true });
        }
        // A 409 in flight alone says so too: the request holding the key may be accepted.
        attempts = 1;
        then = 'in-flight';
        const once = createHeraldServer({ url: standIn, apiKey: API_KEY, retries: 0 });
        expect(await once.notify({ userId: 'frank', payload: {} }).catch((e: unknown) => e)).toMatchObject({
          status: 409,
          maybeAccepted: true,
        });
      },
    );
  });
});
