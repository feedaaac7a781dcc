import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type RequestListener, request, type Server } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from '@herald/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { buildWebServer } from '../src/server/app.js';
import { loadConfig } from '../src/server/config.js';

/** A built page of one file, so that these tests do not depend on the Vite build. */
function publicDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'herald-web-'));
  writeFileSync(join(dir, 'index.html'), '<!doctype html><title>inbox</title>');
  mkdirSync(join(dir, 'assets'));
  writeFileSync(join(dir, 'assets', 'index-3f2a.js'), 'export {};');
  mkdirSync(join(dir, 'element'));
  writeFileSync(join(dir, 'element', 'herald-inbox.js'), 'export {};');
  return dir;
}

/**
 * What the server at `port` writes back to `request` sent as it is over a raw socket, once it closes the
 * connection or `deadlineMs` passes (then what came so far, with `[no close]` appended).
 */
function rawExchange(port: number, request: string, deadlineMs = 3000): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let answer = '';
    const timer = setTimeout(() => {
      socket.destroy();
      resolve(`${answer}[no close]`);
    }, deadlineMs);
    socket.on('data', (chunk) => {
      answer += chunk.toString();
    });
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(answer);
    });
    socket.on('error', reject);
    socket.write(request);
  });
}

/** The JSON body of a raw HTTP/1.1 answer (not chunked). */
function bodyOf(answer: string): unknown {
  return JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4));
}

// Upstreams nobody listens on (port 9 is "discard"; nothing answers it here).
const nowhere = {
  HERALD_GATEWAY_URL: 'http://127.0.0.1:9',
  HERALD_REALTIME_URL: 'http://127.0.0.1:9',
  HERALD_LOG_LEVEL: 'silent',
};

describe('web server', () => {
  const apps: Awaited<ReturnType<typeof buildWebServer>>[] = [];
  const build = async (env: Record<string, string>) => {
    const app = await buildWebServer(loadConfig({ ...nowhere, ...env }, { publicDir: publicDir() }));
    apps.push(app);
    return app;
  };
  const standIns: Server[] = [];
  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
    for (const server of standIns) server.close();
  });
  /** A stand-in gateway on a free port answering with `handler` (closed after the tests): its URL. */
  const standIn = async (handler: RequestListener): Promise<string> => {
    const server = createServer(handler);
    standIns.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  };
  /** `app` listening on a free port of 127.0.0.1: the port. */
  const listening = async (app: Awaited<ReturnType<typeof build>>): Promise<number> => {
    await app.listen({ port: 0, host: '127.0.0.1' });
    return (app.server.address() as { port: number }).port;
  };

  it('serves the page at / and the element (revalidated on every load), hashed assets (for a year), /healthz, and a JSON 404 elsewhere', async () => {
    const app = await build({});
    const page = await app.inject({ url: '/' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toContain('text/html');
    expect(page.headers['cache-control']).toBe('no-cache');
    expect((await app.inject({ url: '/healthz' })).json()).toEqual({ status: 'ok', service: 'web' });
    // Hashed assets for a year; the element, a fixed name other sites embed, revalidated like a page.
    const hashed = await app.inject({ url: '/assets/index-3f2a.js' });
    expect(hashed.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    const element = await app.inject({ url: '/element/herald-inbox.js' });
    expect(element.statusCode).toBe(200);
    expect(element.headers['cache-control']).toBe('no-cache');
    expect(element.headers.etag).toBeDefined();
    // Embeddable from any origin (a module script is fetched in CORS mode); the pages are not.
    expect(element.headers['access-control-allow-origin']).toBe('*');
    expect(page.headers['access-control-allow-origin']).toBeUndefined();
    const missing = await app.inject({ url: '/nope' });
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toMatchObject({ code: 'HERALD_ERR_NOT_FOUND' });
  });

  it('a method a path does not serve is a 405 with Allow, in JSON; a path with nothing to serve a 404 whatever the method', async () => {
    const app = await build({ HERALD_DEV_MODE: 'true' });
    for (const [method, url, allow] of [
      ['POST', '/', 'GET, HEAD'],
      ['PUT', '/element/herald-inbox.js', 'GET, HEAD'],
      ['DELETE', '/assets/index-3f2a.js', 'GET, HEAD'],
      ['POST', '/healthz', 'GET, HEAD'],
      ['PATCH', '/readyz', 'GET, HEAD'],
      ['GET', '/dev/token', 'POST'],
    ] as const) {
      const answer = await app.inject({ method, url });
      expect(answer.statusCode, `${method} ${url}`).toBe(405);
      expect(answer.headers.allow, `${method} ${url}`).toBe(allow);
      expect(answer.json(), `${method} ${url}`).toMatchObject({
        code: 'HERALD_ERR_METHOD_NOT_ALLOWED',
        error: `${method} is not allowed on ${url}: use ${allow.replace(', ', ' or ')}.`,
      });
    }
    // No file there: not found, whatever the method; nor outside the pages' folder.
    for (const [method, url] of [
      ['POST', '/nope'],
      ['DELETE', '/assets/missing.js'],
      ['POST', '/%2e%2e/package.json'],
    ] as const) {
      const answer = await app.inject({ method, url });
      expect(answer.statusCode, `${method} ${url}`).toBe(404);
      expect(answer.headers.allow).toBeUndefined();
    }
  });

  it('/readyz is 503 naming the upstream that does not answer', async () => {
    const app = await build({});
    const ready = await app.inject({ url: '/readyz' });
    expect(ready.statusCode).toBe(503);
    expect(ready.json()).toMatchObject({ code: 'HERALD_ERR_UNAVAILABLE' });
    expect(ready.json().error).toMatch(/gateway at http:\/\/127\.0\.0\.1:9 does not answer/);
  });

  it('production has no demo token route; development mode has it', async () => {
    const production = await build({});
    expect((await production.inject({ method: 'POST', url: '/dev/token' })).statusCode).toBe(404);
    const development = await build({ HERALD_DEV_MODE: 'true' });
    const answer = await development.inject({ method: 'POST', url: '/dev/token' });
    // The gateway is nowhere: the route exists and says so.
    expect(answer.statusCode).toBe(503);
    expect(answer.json()).toMatchObject({ code: 'HERALD_ERR_UNAVAILABLE' });
  });

  it('the demo route refuses a malformed user id with a 400 naming it', async () => {
    const app = await build({ HERALD_DEV_MODE: 'true' });
    const answer = await app.inject({ method: 'POST', url: '/dev/token', payload: { userId: 'a b' } });
    expect(answer.statusCode).toBe(400);
    expect(answer.json()).toMatchObject({ code: 'HERALD_ERR_VALIDATION' });
    expect(answer.json().error).toContain('userId');
  });

  it('the demo route refuses a field it does not know (a typo such as userid) instead of minting for the demo user', async () => {
    const app = await build({ HERALD_DEV_MODE: 'true' });
    const answer = await app.inject({ method: 'POST', url: '/dev/token', payload: { userid: 'bob' } });
    expect(answer.statusCode).toBe(400);
    expect(answer.json()).toEqual({
      error: 'Invalid request: body.userid is not an accepted field (userId, topics)',
      code: 'HERALD_ERR_VALIDATION',
      details: [{ field: 'body.userid', message: 'is not an accepted field (userId, topics)' }],
    });
  });

  it('the demo route reads its body as the gateway does: no coercion, JSON problems named, an empty body is none, UTF-8 only', async () => {
    const app = await build({ HERALD_DEV_MODE: 'true' });
    const send = (payload: string, type = 'application/json') =>
      app.inject({ method: 'POST', url: '/dev/token', headers: { 'content-type': type }, payload });
    // A string where an array goes is refused, not made an array.
    const topics = await send('{"topics":"news"}');
    expect(topics.statusCode).toBe(400);
    expect(topics.json().details).toEqual([{ field: 'body.topics', message: 'must be array' }]);
    const broken = await send('{bad');
    expect(broken.statusCode).toBe(400);
    expect(broken.json()).toMatchObject({ code: 'HERALD_ERR_VALIDATION', details: [{ field: 'body' }] });
    expect(broken.json().error).toMatch(/^Invalid request: body is not valid JSON/);
    const notObject = await send('["bob"]');
    expect(notObject.statusCode).toBe(400);
    expect(notObject.json().details).toEqual([{ field: 'body', message: 'must be an object' }]);
    // No body: the demo user's token (the gateway is nowhere here: 503 says the route got that far).
    for (const empty of ['', '  ', 'null']) expect((await send(empty)).statusCode, empty).toBe(503);
    const latin1 = await send('{"userId":"bob"}', 'application/json; charset=latin1');
    expect(latin1.statusCode).toBe(415);
    expect(latin1.json()).toMatchObject({ code: 'HERALD_ERR_UNSUPPORTED_MEDIA_TYPE' });
  });

  it('the demo route refuses topics that are no topic names with a 400 naming them', async () => {
    const app = await build({ HERALD_DEV_MODE: 'true' });
    const answer = await app.inject({ method: 'POST', url: '/dev/token', payload: { topics: ['a b'] } });
    expect(answer.statusCode).toBe(400);
    expect(answer.json()).toMatchObject({ code: 'HERALD_ERR_VALIDATION' });
    expect(answer.json().error).toContain('topics');
  });

  it('the demo route takes JSON only (another body is a 415 saying so, not a validation riddle), 64 KB at most', async () => {
    const app = await build({ HERALD_DEV_MODE: 'true' });
    for (const type of ['text/plain', 'application/x-www-form-urlencoded']) {
      const answer = await app.inject({
        method: 'POST',
        url: '/dev/token',
        headers: { 'content-type': type },
        payload: 'userId=bob',
      });
      expect(answer.statusCode, type).toBe(415);
      expect(answer.json(), type).toMatchObject({ code: 'HERALD_ERR_UNSUPPORTED_MEDIA_TYPE' });
      expect(answer.json().error, type).toContain('application/json');
    }
    const huge = await app.inject({
      method: 'POST',
      url: '/dev/token',
      payload: { userId: 'a'.repeat(70_000) },
    });
    expect(huge.statusCode).toBe(413);
    expect(huge.json()).toMatchObject({ code: 'HERALD_ERR_BODY_TOO_LARGE' });
  });

  it('the demo route: a gateway (or a balancer before it) that answers without JSON is a 503, not a 500', async () => {
    const gatewayUrl = await standIn((_request, response) => {
      response.writeHead(502, { 'content-type': 'text/html' }).end('<html>Bad Gateway</html>');
    });
    const app = await build({ HERALD_DEV_MODE: 'true', HERALD_GATEWAY_URL: gatewayUrl });
    const answer = await app.inject({ method: 'POST', url: '/dev/token' });
    expect(answer.statusCode).toBe(503);
    expect(answer.json()).toMatchObject({ code: 'HERALD_ERR_UNAVAILABLE' });
    expect(answer.json().error).toContain('502');
    expect(answer.headers['retry-after']).toBe('1');
  });

  it('the gateway’s hop-by-hop headers stay between it and this server (its Keep-Alive is not the browser’s)', async () => {
    // Node's HTTP server adds Keep-Alive: timeout=5 itself; X-Hop is named by Connection.
    const gatewayUrl = await standIn((_request, response) => {
      response
        .writeHead(200, { 'content-type': 'application/json', connection: 'keep-alive, x-hop', 'x-hop': '1' })
        .end('{"ok":true}');
    });
    const port = await listening(await build({ HERALD_GATEWAY_URL: gatewayUrl }));
    const answer = await rawExchange(port, 'GET /api/healthz HTTP/1.1\r\nHost: web\r\n\r\n', 1000);
    expect(answer).toMatch(/^HTTP\/1\.1 200/);
    expect(answer).toContain('{"ok":true}');
    // This server's own keep-alive (72 s), never the gateway's 5 s beside it.
    expect(answer).not.toMatch(/keep-alive: timeout=5/i);
    expect(answer.match(/^keep-alive:/gim)).toHaveLength(1);
    expect(answer).not.toMatch(/^x-hop:/im);
  });

  it('a client whose headers never finish gets a 408 in JSON within the 5 s headers bound (plus the 1 s check)', async () => {
    const port = await listening(await build({}));
    // Node would check only every 30 s (and its headers bound is 60 s): well past 8 s.
    const answer = await rawExchange(port, 'GET / HTTP/1.1\r\nHost: web\r\n', 8000);
    expect(answer).not.toContain('[no close]');
    expect(answer).toMatch(/^HTTP\/1\.1 408/);
    expect(bodyOf(answer)).toMatchObject({ code: 'HERALD_ERR_REQUEST_TIMEOUT' });
  });

  it('a request that reaches it while it drains (a keep-alive connection) is a 503 in Herald’s shape with Retry-After', async () => {
    let arrived = false;
    const gatewayUrl = await standIn((_request, response) => {
      arrived = true;
      setTimeout(
        () => response.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}'),
        300,
      );
    });
    const app = await build({ HERALD_GATEWAY_URL: gatewayUrl });
    const port = await listening(app);
    // A keep-alive connection with a request in flight; the next comes once the server drains.
    const socket = connect(port, '127.0.0.1');
    let answer = '';
    socket.on('data', (chunk) => {
      answer += chunk.toString();
    });
    const ended = new Promise((resolve) => socket.on('close', resolve));
    socket.write('GET /api/slow HTTP/1.1\r\nHost: web\r\n\r\n');
    await waitFor(() => arrived, { timeoutMs: 3000, what: 'the proxied request to reach the gateway' });
    const closing = app.close();
    socket.write('GET /healthz HTTP/1.1\r\nHost: web\r\n\r\n');
    await Promise.race([ended, closing.then(() => socket.destroy())]);
    await closing;
    // The request in flight is finished; the next is refused, saying when to try again.
    expect(answer).toMatch(/^HTTP\/1\.1 200/);
    const second = answer.slice(answer.indexOf('HTTP/1.1', 1));
    expect(second).toMatch(/^HTTP\/1\.1 503/);
    expect(second).toMatch(/^retry-after: 1\r$/im);
    expect(bodyOf(second)).toMatchObject({ code: 'HERALD_ERR_UNAVAILABLE' });
  });

  it('an upstream that does not answer is a JSON 503 on /api', async () => {
    const app = await build({});
    const answer = await app.inject({ url: '/api/healthz' });
    expect(answer.statusCode).toBe(503);
    expect(answer.json()).toMatchObject({ code: 'HERALD_ERR_UNAVAILABLE' });
    // As the gateway's own 503s: when to try again.
    expect(answer.headers['retry-after']).toBe('1');
  });

  it('a WebSocket upgrade while the realtime server does not answer is a JSON 503 with Retry-After, not an upgrade accepted then closed (clients waited out their 10 s connect timeout each time)', async () => {
    const port = await listening(await build({}));
    const answer = await rawExchange(
      port,
      'GET /socket.io/?EIO=4&transport=websocket HTTP/1.1\r\nHost: web\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
        'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
    );
    expect(answer).toMatch(/^HTTP\/1\.1 503/);
    expect(answer).toMatch(/\r\nretry-after: 1\r\n/i);
    expect(bodyOf(answer)).toMatchObject({ code: 'HERALD_ERR_UNAVAILABLE' });
  });

  it('the gateway’s /metrics (every tenant’s traffic) is a 404 at /api/metrics, however it is spelled, never sent on', async () => {
    let reached = 0;
    const gatewayUrl = await standIn((_request, response) => {
      reached++;
      response.writeHead(200, { 'content-type': 'text/plain' }).end('herald_http_requests_total 1');
    });
    const port = await listening(await build({ HERALD_GATEWAY_URL: gatewayUrl }));
    for (const path of [
      '/api/metrics',
      '/api/metrics/',
      '/api/metrics?x=1',
      '/api/%6detrics',
      '/api/%6D%65trics/',
      // Dot segments, which the proxy's URL resolves before it sends on.
      '/api/./metrics',
      '/api/%2e/metrics',
      '/api/%2E/./metrics/',
      '/api/metrics/.',
    ]) {
      const answer = await rawExchange(
        port,
        `GET ${path} HTTP/1.1\r\nHost: web\r\nConnection: close\r\n\r\n`,
      );
      expect(answer, path).toMatch(/^HTTP\/1\.1 404/);
      expect(bodyOf(answer), path).toMatchObject({ code: 'HERALD_ERR_NOT_FOUND' });
    }
    expect(reached).toBe(0);
    // The gateway's other routes still pass (its /metrics is for Prometheus on its own port).
    const health = await rawExchange(
      port,
      'GET /api/healthz HTTP/1.1\r\nHost: web\r\nConnection: close\r\n\r\n',
    );
    expect(health).toMatch(/^HTTP\/1\.1 200/);
    expect(reached).toBe(1);
  });

  it('a path under /api that climbs out of it (.., %2e%2e) is a 400 saying so, never sent on', async () => {
    const app = await build({});
    await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.server.address() as AddressInfo;
    // As sent (curl --path-as-is): node:http leaves the path alone, inject() would resolve it.
    const get = (path: string) =>
      new Promise<{ status: number; body: { code: string; error: string } }>((resolve, reject) => {
        request({ host: '127.0.0.1', port, path }, (response) => {
          let text = '';
          response.on('data', (chunk: Buffer) => (text += chunk));
          response.on('end', () => resolve({ status: response.statusCode ?? 0, body: JSON.parse(text) }));
        })
          .on('error', reject)
          .end();
      });
    for (const path of ['/api/../readyz', '/api/%2e%2e/readyz', '/api/x/../../readyz']) {
      const answer = await get(path);
      expect(answer.status, path).toBe(400);
      expect(answer.body.code, path).toBe('HERALD_ERR_BAD_REQUEST');
      expect(answer.body.error, path).toMatch(/'\.\.' segment.*send the gateway's path as it is/);
    }
    // What else the proxy refuses is named as it is, for the upstream of its prefix (before: "a '..'
    // segment" and "the gateway's path" for all of them).
    const empty = await get('/api//healthz');
    expect(empty.status).toBe(400);
    expect(empty.body.error).toMatch(/empty segment.*send the gateway's path as it is/);
    expect(empty.body.error).not.toContain("'..'");
    const realtime = await get('/socket.io/../x');
    expect(realtime.status).toBe(400);
    expect(realtime.body.error).toMatch(/'\.\.' segment.*the realtime server's path as it is/);
  });

  it('pages and files say nosniff, and no other site may frame them (the dashboard takes the admin key)', async () => {
    const app = await build({});
    for (const url of ['/', '/assets/index-3f2a.js', '/nope']) {
      const answer = await app.inject({ url });
      expect(answer.headers['x-content-type-options'], url).toBe('nosniff');
    }
    const page = await app.inject({ url: '/' });
    expect(page.headers['content-security-policy']).toBe("frame-ancestors 'none'");
    expect(page.headers['x-frame-options']).toBe('DENY');
  });

  it('answers what the router and Node refuse in Herald’s shape; an Upgrade to /api is answered, never left hanging', async () => {
    const port = await listening(await build({}));
    const send = (line: string, headers = '') =>
      rawExchange(port, `${line}\r\nHost: web\r\nConnection: close\r\n${headers}\r\n`);
    // A path that leaves the pages' folder: there is no file there, as for any other path without one.
    const traversal = await send('GET /%2e%2e/package.json HTTP/1.1');
    expect(traversal).toMatch(/^HTTP\/1\.1 404/);
    expect(bodyOf(traversal)).toMatchObject({ code: 'HERALD_ERR_NOT_FOUND' });
    const badUrl = await send('GET /% HTTP/1.1');
    expect(badUrl).toMatch(/^HTTP\/1\.1 400/);
    expect(bodyOf(badUrl)).toMatchObject({ code: 'HERALD_ERR_BAD_REQUEST' });
    const method = await send('FOO / HTTP/1.1');
    expect(method).toMatch(/^HTTP\/1\.1 400/);
    expect(bodyOf(method)).toMatchObject({ code: 'HERALD_ERR_BAD_REQUEST' });
    // A header the gateway takes once, sent twice: Node would pass on the first only, so the gateway
    // could not refuse it as it does; refused here, naming it (the gateway is nowhere: not a 503).
    const twice = await send(
      'GET /api/notifications HTTP/1.1',
      'Authorization: Bearer one\r\nAuthorization: Bearer two\r\n',
    );
    expect(twice).toMatch(/^HTTP\/1\.1 400/);
    expect(bodyOf(twice)).toMatchObject({ code: 'HERALD_ERR_BAD_REQUEST' });
    expect((bodyOf(twice) as { error: string }).error).toContain('Authorization header more than once');
    // A coding Node does not decode (it takes off the chunks only): the gateway refuses it; passed on, the
    // gzip bytes would have become the body as they are.
    const coded = await send(
      'POST /api/notify HTTP/1.1',
      'Transfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n',
    );
    expect(coded).toMatch(/^HTTP\/1\.1 400/);
    expect((bodyOf(coded) as { error: string }).error).toContain('Transfer-Encoding');
    // HTTP/1.1 without Host: Node's answer is an empty 400.
    const hostless = await rawExchange(port, 'GET / HTTP/1.1\r\nConnection: close\r\n\r\n');
    expect(hostless).toMatch(/^HTTP\/1\.1 400/);
    expect(bodyOf(hostless)).toMatchObject({ code: 'HERALD_ERR_BAD_REQUEST' });
    // `curl --http2 http://…/api/…` asks for h2c this way: the gateway takes no upgrade.
    const upgrade = await send('GET /api/healthz HTTP/1.1', 'Upgrade: h2c\r\nConnection: Upgrade\r\n');
    expect(upgrade).not.toContain('[no close]');
    expect(upgrade).toMatch(/^HTTP\/1\.1 400/);
    expect(bodyOf(upgrade)).toMatchObject({ code: 'HERALD_ERR_BAD_REQUEST' });
  });
});
