import { randomUUID } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { USER_ID_MAX_LENGTH } from '@herald/protocol';
import { waitFor } from '@herald/testing';
import { beforeAll, describe, expect, it } from 'vitest';
import { MAX_PARAM_LENGTH } from '../src/plugins/app/http-layer.js';
import { API_KEY, API_KEY_2, auth, postRaw, testAppForFile } from './helpers.js';
import { answerBeforeClose, exchange, floodBody, open, parseAnswer } from './raw-http.js';

const app = await testAppForFile({
  HERALD_SENDER_RATE_LIMIT_BURST: '1',
  HERALD_SENDER_RATE_LIMIT_PER_SECOND: '0.01',
});
let port: number;
let base: string;
beforeAll(async () => {
  await app.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.address();
  port = typeof address === 'object' && address ? address.port : 0;
  base = `http://127.0.0.1:${port}`;
});

/** Herald's error shape, with a stable code. */
function expectHeraldError(body: string, code: string): void {
  const parsed = JSON.parse(body) as { error?: unknown; code?: unknown };
  expect(typeof parsed.error).toBe('string');
  expect(parsed.code).toBe(code);
}

describe("errors raised by Node's HTTP parser have Herald's shape", () => {
  it.each([
    ['a malformed request line', 'GARBAGE\r\n\r\n', 400, 'HERALD_ERR_BAD_REQUEST'],
    [
      'a malformed header',
      'GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n',
      400,
      'HERALD_ERR_BAD_REQUEST',
    ],
    [
      'bad chunked encoding',
      `POST /notify HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${API_KEY}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`,
      400,
      'HERALD_ERR_BAD_REQUEST',
    ],
    [
      'both Content-Length and chunked',
      'POST /notify HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}',
      400,
      'HERALD_ERR_BAD_REQUEST',
    ],
    [
      'headers over 16 KB',
      `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
      431,
      'HERALD_ERR_HEADERS_TOO_LARGE',
    ],
  ])('%s', async (_what, bytes, status, code) => {
    const { answer } = await exchange(port, bytes);
    expect(answer.status).toBe(status);
    expect(answer.headers['content-type']).toMatch(/^application\/json/);
    expectHeraldError(answer.body, code);
  });

  it.each([
    ['an unknown method', 'FOO /healthz HTTP/1.1\r\nHost: x\r\n\r\n', /method/],
    ['a raw UTF-8 path', 'GET /users/\u00e9/notifications HTTP/1.1\r\nHost: x\r\n\r\n', /percent-encode/],
    ['a space before a header colon', 'GET /healthz HTTP/1.1\r\nHost : x\r\n\r\n', /header name/],
    ['a bare LF line ending', 'GET /healthz HTTP/1.1\nHost: x\n\n', /CRLF/],
    [
      'a signed Content-Length',
      'POST /tokens HTTP/1.1\r\nHost: x\r\nContent-Length: +2\r\n\r\n{}',
      /Content-Length/,
    ],
    [
      'a chunk size that is not hex',
      `POST /tokens HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${API_KEY}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`,
      /chunk/,
    ],
  ])('%s is a 400 that says what is wrong', async (_what, bytes, message) => {
    const { answer } = await exchange(port, Buffer.from(bytes));
    expect(answer.status).toBe(400);
    expectHeraldError(answer.body, 'HERALD_ERR_BAD_REQUEST');
    expect(JSON.parse(answer.body).error).toMatch(message);
  });

  it('a badly percent-encoded path is a 400 saying so, and the connection is closed (as the README says)', async () => {
    // No half-close: the server closes it, having answered.
    const answer = await answerBeforeClose(port, 'GET /hea%zzlthz HTTP/1.1\r\nHost: x\r\n\r\n', {
      timeoutMs: 5000,
      what: 'the server to close the connection',
    });
    expect(answer?.status).toBe(400);
    expect(answer?.headers.connection).toBe('close');
    expectHeraldError(answer?.body ?? '', 'HERALD_ERR_BAD_REQUEST');
    expect(JSON.parse(answer?.body ?? '{}').error).toMatch(/percent-encoding/);
  });

  it('a transfer coding other than chunked alone is a 400 naming it, not ignored', async () => {
    // Node decodes chunked only: "deflate, chunked" was read as if the body were not deflated.
    const json = Buffer.from('{"userId":"u"}');
    for (const [coding, body] of [
      ['gzip, chunked', gzipSync(json)],
      ['deflate, chunked', json],
      ['foo, chunked', json],
    ] as const) {
      const head = `POST /tokens HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${API_KEY}\r\nContent-Type: application/json\r\nTransfer-Encoding: ${coding}\r\n\r\n`;
      const chunked = Buffer.concat([
        Buffer.from(`${head}${body.length.toString(16)}\r\n`),
        body,
        Buffer.from('\r\n0\r\n\r\n'),
      ]);
      const { answer } = await exchange(port, chunked);
      expect(answer.status, coding).toBe(400);
      expectHeraldError(answer.body, 'HERALD_ERR_BAD_REQUEST');
      expect(JSON.parse(answer.body).error, coding).toContain(`Transfer-Encoding "${coding}"`);
    }
  });

  it('a request cut short by a half-close is a 400 saying it ended before it was complete', async () => {
    for (const bytes of [
      `POST /tokens HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${API_KEY}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"userId":`,
      'GET /healthz HTTP/1.1\r\nHost: x\r\n',
    ]) {
      const { answer } = await exchange(port, bytes);
      expect(answer.status).toBe(400);
      expectHeraldError(answer.body, 'HERALD_ERR_BAD_REQUEST');
      expect(JSON.parse(answer.body).error).toMatch(/ended before .* complete/);
    }
  });

  it('a URL over 16 KB is a 431 that names the URL (Node counts the request line with the headers)', async () => {
    const { answer } = await exchange(
      port,
      `GET /users/alice/notifications?after=${'1'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`,
    );
    expect(answer.status).toBe(431);
    expectHeraldError(answer.body, 'HERALD_ERR_HEADERS_TOO_LARGE');
    expect(JSON.parse(answer.body).error).toMatch(/URL/);
  });
});

describe("requests Node refuses itself before Fastify sees them have Herald's shape", () => {
  const tokenBody = '{"userId":"u"}';
  const tokenHead = (headers: string) =>
    `POST /tokens HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${API_KEY}\r\nContent-Type: application/json\r\nContent-Length: ${tokenBody.length}\r\n${headers}\r\n`;

  it('an HTTP/1.1 request without Host is a 400 naming the header, before authentication; the connection is closed', async () => {
    for (const bytes of [
      'GET /healthz HTTP/1.1\r\n\r\n',
      `POST /notify HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`,
    ]) {
      const { answer } = await exchange(port, bytes);
      expect(answer.status, bytes).toBe(400);
      expect(answer.headers['content-type']).toMatch(/^application\/json/);
      expect(answer.headers.connection).toBe('close');
      expectHeraldError(answer.body, 'HERALD_ERR_BAD_REQUEST');
      expect(JSON.parse(answer.body).error).toMatch(/Host header/);
    }
  });

  it('a Host header with an empty value, and HTTP/1.0 without Host, are served (as HTTP allows)', async () => {
    expect((await exchange(port, 'GET /healthz HTTP/1.1\r\nHost:\r\n\r\n')).answer.status).toBe(200);
    expect((await exchange(port, 'GET /healthz HTTP/1.0\r\n\r\n')).answer.status).toBe(200);
  });

  it('an Expect other than 100-continue is a 417 naming the value', async () => {
    for (const expectation of ['bogus', '']) {
      const { answer } = await exchange(port, `${tokenHead(`Expect: ${expectation}\r\n`)}${tokenBody}`);
      expect(answer.status, expectation).toBe(417);
      expect(answer.headers['content-type']).toMatch(/^application\/json/);
      expectHeraldError(answer.body, 'HERALD_ERR_EXPECTATION_FAILED');
      expect(JSON.parse(answer.body).error).toContain(`"${expectation}"`);
    }
    // Before authentication, on any path.
    for (const path of ['/notify', '/nowhere']) {
      const { answer } = await exchange(
        port,
        `POST ${path} HTTP/1.1\r\nHost: x\r\nExpect: bogus\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`,
      );
      expect(answer.status, path).toBe(417);
      expectHeraldError(answer.body, 'HERALD_ERR_EXPECTATION_FAILED');
    }
  });

  it('Expect: 100-continue still gets 100 Continue, then the answer to the body', async () => {
    const socket = await open(port);
    const received: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    socket.on('error', () => {});
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.write(tokenHead('Expect: 100-continue\r\nConnection: close\r\n'));
    await waitFor(() => Buffer.concat(received).toString().startsWith('HTTP/1.1 100 Continue\r\n\r\n'), {
      what: '100 Continue',
    });
    // The body after the 100 Continue, on the same open connection (Connection: close ends it).
    socket.write(tokenBody);
    await closed;
    const answer = parseAnswer(
      Buffer.concat(received).toString().slice('HTTP/1.1 100 Continue\r\n\r\n'.length),
    );
    expect(answer?.status).toBe(200);
    expect(JSON.parse(answer?.body ?? '{}')).toHaveProperty('token');
  });

  it('CONNECT is a 405 in JSON with Allow (the gateway is no proxy), and the connection is closed', async () => {
    const tunnel = await exchange(port, 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n');
    expect(tunnel.answer.status).toBe(405);
    expect(tunnel.answer.headers['content-type']).toMatch(/^application\/json/);
    expect(tunnel.answer.headers.connection).toBe('close');
    expect(tunnel.answer.headers).toHaveProperty('allow', '');
    expectHeraldError(tunnel.answer.body, 'HERALD_ERR_METHOD_NOT_ALLOWED');
    expect(JSON.parse(tunnel.answer.body).error).toMatch(/CONNECT/);
    // A CONNECT to a path of the gateway lists that path's methods, as every other 405 does.
    const path = await exchange(port, 'CONNECT /notify HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(path.answer.status).toBe(405);
    expect(path.answer.headers.allow).toBe('POST');
    expectHeraldError(path.answer.body, 'HERALD_ERR_METHOD_NOT_ALLOWED');
    // HTTP/1.0 too, and the gateway still serves afterwards.
    expect((await exchange(port, 'CONNECT example.com:443 HTTP/1.0\r\n\r\n')).answer.status).toBe(405);
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
  });

  it('a client that half-closes its side once its request is sent still gets the answer (RFC 9112 §9.6)', async () => {
    // Node's server ends such a connection and drops the answer, though the route ran: a 202 lost, whose
    // retry would deliver twice without an Idempotency-Key. HTTP/1.0 clients and `nc -N` do this.
    for (const version of ['1.1', '1.0']) {
      const { answer } = await exchange(
        port,
        `${tokenHead('').replace('HTTP/1.1', `HTTP/${version}`)}${tokenBody}`,
      );
      expect(answer.status, version).toBe(200);
      expect(JSON.parse(answer.body), version).toHaveProperty('token');
    }
  });

  it('a header that must come once (Host, Authorization, Idempotency-Key, Content-Type) sent twice is a 400 naming it', async () => {
    // Node keeps the first Host, Authorization and Content-Type and joins two Idempotency-Keys with ", ":
    // a proxy that reads the other one would act for another tenant, or another key.
    const key2 = `Authorization: Bearer ${API_KEY_2}\r\n`;
    for (const [header, bytes] of [
      ['Host', 'GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n'],
      ['Authorization', `${tokenHead(key2)}${tokenBody}`],
      ['Content-Type', `${tokenHead('Content-Type: text/plain\r\n')}${tokenBody}`],
      ['Idempotency-Key', `${tokenHead('Idempotency-Key: a\r\nIdempotency-Key: b\r\n')}${tokenBody}`],
    ] as const) {
      const { answer } = await exchange(port, bytes);
      expect(answer.status, header).toBe(400);
      expectHeraldError(answer.body, 'HERALD_ERR_BAD_REQUEST');
      expect(JSON.parse(answer.body).error, header).toContain(`${header} header more than once`);
    }
    // Headers that are lists may repeat.
    const { answer } = await exchange(
      port,
      `${tokenHead('Accept: a/b\r\nAccept: application/json\r\n')}${tokenBody}`,
    );
    expect(answer.status).toBe(200);
  });

  it('an Upgrade the gateway does not speak is ignored: the request is served as plain HTTP', async () => {
    const { answer } = await exchange(
      port,
      'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, close\r\nUpgrade: websocket\r\n\r\n',
    );
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body)).toEqual({ status: 'ok' });
  });
});

describe('routing errors', () => {
  it('a method a path does not serve is a 405 with Allow, in JSON', async () => {
    for (const method of ['PUT', 'DELETE', 'PATCH', 'OPTIONS', 'GET']) {
      const response = await fetch(`${base}/notify`, { method, headers: auth });
      expect(response.status, method).toBe(405);
      expect(response.headers.get('allow')).toBe('POST');
      expectHeraldError(await response.text(), 'HERALD_ERR_METHOD_NOT_ALLOWED');
    }
    const head = await fetch(`${base}/notify`, { method: 'HEAD', headers: auth });
    expect(head.status).toBe(405);
    expect((await fetch(`${base}/healthz`, { method: 'HEAD' })).status).toBe(200);
    const unknown = await fetch(`${base}/nowhere`, { method: 'PUT' });
    expect(unknown.status).toBe(404);
    expectHeraldError(await unknown.text(), 'HERALD_ERR_NOT_FOUND');
  });

  it('a file missing under a route that serves files is a 404, not a 405 telling to use the method sent', async () => {
    for (const method of ['GET', 'HEAD']) {
      const response = await fetch(`${base}/docs/static/nope.js`, { method });
      expect(response.status, method).toBe(404);
      expect(response.headers.get('allow'), method).toBeNull();
    }
    expectHeraldError(await (await fetch(`${base}/docs/static/nope.js`)).text(), 'HERALD_ERR_NOT_FOUND');
    // A path that leaves the files' folder ("..", encoded) finds nothing either: a 404, not a bare 403.
    // Sent as it is (fetch would resolve the dots itself).
    for (const path of ['/docs/static/%2e%2e/package.json', '/docs/static/..%2f..%2fpackage.json']) {
      const { answer } = await exchange(port, `GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
      expect(answer.status, path).toBe(404);
      expectHeraldError(answer.body, 'HERALD_ERR_NOT_FOUND');
    }
  });

  it('a path or method the gateway does not serve is a 404 or 405 whatever the body, which is not read', async () => {
    const large = `{"a":"${'x'.repeat(70_000)}"}`;
    for (const [method, path, status] of [
      ['POST', '/healthz', 405],
      ['PUT', '/notify', 405],
      ['DELETE', '/users/alice/notifications', 405],
      ['POST', '/nowhere', 404],
    ] as const) {
      for (const [headers, body] of [
        [{ 'content-type': 'application/json' }, '{bad'],
        [{ 'content-type': 'text/plain' }, 'hello'],
        [{ 'content-type': 'application/json; charset=latin1' }, '{}'],
        [{ 'content-type': 'application/json', 'content-encoding': 'gzip' }, 'x'],
        [{ 'content-type': 'application/json' }, large],
      ] as const) {
        const response = await fetch(`${base}${path}`, { method, headers: { ...auth, ...headers }, body });
        const what = `${method} ${path} ${JSON.stringify(headers)} ${body.slice(0, 10)}`;
        expect(response.status, what).toBe(status);
        expectHeraldError(
          await response.text(),
          status === 404 ? 'HERALD_ERR_NOT_FOUND' : 'HERALD_ERR_METHOD_NOT_ALLOWED',
        );
      }
    }
  });

  it(`the inbox routes take every user id /notify takes: ${USER_ID_MAX_LENGTH} characters, every one percent-encoded`, async () => {
    const userId = `a/b@c+d=e|f:g~h.i_j-${'/'.repeat(USER_ID_MAX_LENGTH - 20)}`;
    expect(userId).toHaveLength(USER_ID_MAX_LENGTH);
    const accepted = await app.inject({ method: 'POST', url: '/tokens', headers: auth, payload: { userId } });
    expect(accepted.statusCode).toBe(200);
    const id = randomUUID();
    await app.inbox.append({ id, userId, payload: { n: 1 }, createdAt: new Date().toISOString() });
    const encoded = [...userId]
      .map((c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`)
      .join('');
    expect(encoded).toHaveLength(MAX_PARAM_LENGTH);
    const page = await fetch(`${base}/users/${encoded}/notifications`, { headers: auth });
    expect(page.status, await page.clone().text()).toBe(200);
    expect(((await page.json()) as { items: { id: string }[] }).items.map((item) => item.id)).toEqual([id]);
    const read = await fetch(`${base}/users/${encodeURIComponent(userId)}/notifications/read`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ ids: [id] }),
    });
    expect(read.status).toBe(200);
    expect(await read.json()).toMatchObject({ changed: 1 });
  });

  it('a path parameter over the limit is a 414 in JSON; a user id over 256 characters a 400 naming it', async () => {
    const tooLong = await fetch(`${base}/users/${'a'.repeat(MAX_PARAM_LENGTH + 1)}/notifications`, {
      headers: auth,
    });
    expect(tooLong.status).toBe(414);
    expectHeraldError(await tooLong.text(), 'HERALD_ERR_URI_TOO_LONG');
    const overUserId = await fetch(`${base}/users/${'a'.repeat(USER_ID_MAX_LENGTH + 1)}/notifications`, {
      headers: auth,
    });
    expect(overUserId.status).toBe(400);
    expect(await overUserId.json()).toMatchObject({
      code: 'HERALD_ERR_VALIDATION',
      details: [{ field: 'params.userId' }],
    });
  });
});

describe('bodies', () => {
  const post = (body: string | Buffer, headers: Record<string, string>) =>
    fetch(`${base}/tokens`, { method: 'POST', headers: { ...auth, ...headers }, body });

  it.each([
    ['text/plain', { 'content-type': 'text/plain' }, 415, 'HERALD_ERR_UNSUPPORTED_MEDIA_TYPE'],
    [
      'form data',
      { 'content-type': 'application/x-www-form-urlencoded' },
      415,
      'HERALD_ERR_UNSUPPORTED_MEDIA_TYPE',
    ],
    [
      'a charset other than UTF-8',
      { 'content-type': 'application/json; charset=iso-8859-1' },
      415,
      'HERALD_ERR_UNSUPPORTED_MEDIA_TYPE',
    ],
    [
      'gzip',
      { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      415,
      'HERALD_ERR_UNSUPPORTED_MEDIA_TYPE',
    ],
  ])('%s is a 415', async (_what, headers, status, code) => {
    const response = await post('{"userId":"u"}', headers);
    expect(response.status).toBe(status);
    expectHeraldError(await response.text(), code);
  });

  it('a Content-Type that is not one media type is a 415 naming it', async () => {
    const response = await post('{"userId":"u"}', { 'content-type': 'application/json, text/plain' });
    expect(response.status).toBe(415);
    expect(await response.json()).toEqual({
      error:
        'Content-Type "application/json, text/plain" is not supported: send JSON with "Content-Type: application/json".',
      code: 'HERALD_ERR_UNSUPPORTED_MEDIA_TYPE',
    });
  });

  it('a Content-Encoding on a request without a body is no reason to refuse it (nothing to decode)', async () => {
    for (const path of ['/healthz', '/users/alice/notifications', `/notifications/${randomUUID()}`]) {
      const bare = await fetch(`${base}${path}`, { headers: auth });
      const encoded = await fetch(`${base}${path}`, { headers: { ...auth, 'content-encoding': 'gzip' } });
      expect(encoded.status, path).toBe(bare.status);
    }
    const removed = await fetch(`${base}/topics/orders/subscribers/carol`, {
      method: 'DELETE',
      headers: { ...auth, 'content-encoding': 'br' },
    });
    expect(removed.status).toBe(200);
  });

  it('a route that takes no body accepts an empty one with any Content-Type, as it does one without', async () => {
    const send = (method: string, path: string, headers: Record<string, string> = {}, body?: string) =>
      fetch(`${base}${path}`, {
        method,
        headers: { ...auth, ...headers },
        ...(body === undefined ? {} : { body }),
      });
    for (const [method, path] of [
      ['DELETE', '/topics/orders/subscribers/alice'],
      ['DELETE', '/webhook'],
      ['POST', '/webhook/rotate-secret'],
      ['DELETE', `/notifications/${randomUUID()}`],
      ['DELETE', '/notify'],
      ['PUT', '/nowhere'],
    ] as const) {
      const bare = await send(method, path);
      const expected = { status: bare.status, body: await bare.json() };
      for (const [headers, body] of [
        [{ 'content-type': 'application/json' }, undefined],
        [{ 'content-type': 'application/json; charset=utf-8' }, ''],
        [{ 'content-type': 'application/json' }, ' \r\n'],
        // What fetch and others send with an empty string body.
        [{ 'content-type': 'text/plain;charset=UTF-8' }, ''],
      ] as const) {
        const response = await send(method, path, headers, body);
        const what = `${method} ${path} ${JSON.stringify(headers)} ${JSON.stringify(body)}`;
        expect({ status: response.status, body: await response.json() }, what).toEqual(expected);
      }
    }
    const subscribe = await send('PUT', '/topics/orders/subscribers/bob', {
      'content-type': 'application/json',
    });
    expect(subscribe.status).toBe(200);
    expect(await subscribe.json()).toMatchObject({ topic: 'orders', changed: 1 });
  });

  it('a route that needs a body answers a 400 saying it is empty, with or without a Content-Type', async () => {
    for (const headers of [{ 'content-type': 'application/json' }, {}]) {
      for (const [method, path] of [
        ['POST', '/tokens'],
        ['DELETE', '/topics/orders/subscribers'],
        ['POST', '/users/alice/notifications/read'],
      ] as const) {
        const response = await fetch(`${base}${path}`, { method, headers: { ...auth, ...headers } });
        const what = `${method} ${path} ${JSON.stringify(headers)}`;
        expect(response.status, what).toBe(400);
        expect(await response.json(), what).toEqual({
          error: 'Invalid request: body is empty: send a JSON object',
          code: 'HERALD_ERR_VALIDATION',
          details: [{ field: 'body', message: 'is empty: send a JSON object' }],
        });
      }
    }
  });

  it('JSON in UTF-8 with a BOM or an odd but UTF-8 charset is accepted; invalid UTF-8 is a 400', async () => {
    expect((await post('\ufeff{"userId":"u"}', { 'content-type': 'application/json' })).status).toBe(200);
    expect(
      (await post('{"userId":"u"}', { 'content-type': 'application/json;charset="UTF-8"' })).status,
    ).toBe(200);
    const invalid = await post(Buffer.from('{"userId":"\xff"}', 'latin1'), {
      'content-type': 'application/json',
    });
    expect(invalid.status).toBe(400);
    expect(await invalid.json()).toMatchObject({
      code: 'HERALD_ERR_VALIDATION',
      details: [{ field: 'body', message: 'is not valid UTF-8' }],
    });
  });
});

describe('slow and endless requests are cut off', () => {
  it.each([
    [
      'headers that never finish',
      'POST /notify HTTP/1.1\r\nHost: x\r\n',
      'X-Drip: 1\r\n',
      'a slowloris connection',
    ],
    [
      'a body that trickles in',
      `POST /tokens HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${API_KEY}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{`,
      ' ',
      'a trickling body',
    ],
  ])('%s: a 408 in JSON and the connection is closed', async (_case, start, drop, what) => {
    const answer = await answerBeforeClose(port, start, {
      drip: drop,
      timeoutMs: 30_000,
      what: `the gateway to close ${what}`,
    });
    expect(answer?.status).toBe(408);
    expectHeraldError(answer?.body ?? '', 'HERALD_ERR_REQUEST_TIMEOUT');
  });

  const OFFERED = 1024 * 1024 * 1024;
  const head = (headers: string) =>
    `POST /notify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${headers}\r\n`;

  it('a 401 does not read the body: huge Content-Length', async () => {
    const result = await floodBody(port, head(`Content-Length: ${OFFERED}\r\n`), OFFERED);
    expect(result.answer?.status).toBe(401);
    expect(result.answer?.headers.connection).toBe('close');
    expect(result.closedByServer).toBe(true);
    // Loopback socket buffers hold a few MB; the server stops far below the 1 GB offered.
    expect(result.bodyBytesSent).toBeLessThan(64 * 1024 * 1024);
  });

  it('a 401 does not read the body: endless chunked body', async () => {
    const chunked = (bytes: Buffer) =>
      Buffer.concat([Buffer.from(`${bytes.length.toString(16)}\r\n`), bytes, Buffer.from('\r\n')]);
    const result = await floodBody(port, head('Transfer-Encoding: chunked\r\n'), OFFERED, chunked);
    expect(result.answer?.status).toBe(401);
    expect(result.closedByServer).toBe(true);
    expect(result.bodyBytesSent).toBeLessThan(64 * 1024 * 1024);
  });

  it('a 401 with a small body keeps the connection (the body is drained, bounded by the 64 KB limit)', async () => {
    const { answer } = await exchange(port, `${head('Content-Length: 2\r\n')}{}`);
    expect(answer.status).toBe(401);
    expect(answer.headers.connection).not.toBe('close');
  });

  it('a body refused by the body parser (415, 400) keeps the connection when it is small, as a 401 does', async () => {
    for (const [type, body, status] of [
      ['text/plain', '{"userId":"u"}', 415],
      ['application/json; charset=latin1', '{"userId":"u"}', 415],
      ['application/json', '{"userId":', 400],
    ] as const) {
      const refused = `POST /tokens HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${API_KEY}\r\nContent-Type: ${type}\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
      // The same connection then serves the next request.
      const { text, answer } = await exchange(port, `${refused}GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n`);
      expect(answer.status, type).toBe(status);
      expect(answer.headers.connection, type).not.toBe('close');
      expect(text.match(/HTTP\/1\.1 200 OK/g), type).toHaveLength(1);
    }
  });

  it('a sender over its limit (429 from the precheck) does not read the body', async () => {
    // Burst 1: this takes the only token; the next refusal puts the key in the local deny cache.
    const send = () => postRaw(app, JSON.stringify({ userId: 'x', payload: {} }));
    expect((await send()).statusCode).toBe(202);
    expect((await send()).statusCode).toBe(429);
    const result = await floodBody(
      port,
      head(`Authorization: Bearer ${API_KEY}\r\nContent-Length: ${OFFERED}\r\n`),
      OFFERED,
    );
    expect(result.answer?.status).toBe(429);
    expect(result.answer?.headers.connection).toBe('close');
    expect(result.closedByServer).toBe(true);
    expect(result.bodyBytesSent).toBeLessThan(64 * 1024 * 1024);
  });
});
