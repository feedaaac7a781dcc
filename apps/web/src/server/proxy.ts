import type { IncomingHttpHeaders } from 'node:http';
import { connect } from 'node:net';
import proxy from '@fastify/http-proxy';
import { ONCE_HEADERS, repeatedHeader, unsupportedTransferCoding } from '@herald/config';
import { ErrorCode } from '@herald/protocol';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { WebConfig } from './config.js';

/**
 * `X-Forwarded-For` with the browser's address appended, so that the gateway and the realtime
 * servers (with `HERALD_TRUST_PROXY` naming this server) limit each browser, not this one address.
 */
function forwardedFor(request: FastifyRequest, headers: IncomingHttpHeaders): string {
  const before = headers['x-forwarded-for'];
  const chain = Array.isArray(before) ? before.join(', ') : before;
  return chain ? `${chain}, ${request.ip}` : request.ip;
}

/** Hop-by-hop headers (RFC 9110 §7.6.1): they describe the upstream's connection, not the browser's. */
const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'upgrade'];

/**
 * An upstream's answer headers without its hop-by-hop ones and those its `Connection` names (the
 * gateway's `Keep-Alive: timeout=5` would tell the browser another timeout than this server's).
 */
function endToEnd(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const named = String(headers.connection ?? '')
    .split(',')
    .map((name) => name.trim().toLowerCase());
  const kept = { ...headers };
  for (const name of [...HOP_BY_HOP, ...named]) delete kept[name];
  return kept;
}

/**
 * Whether `url` (under `/api`, as sent) is the gateway's `/metrics` as the gateway's router would read it
 * (%-decoded, its dot segments resolved as the proxy's URL resolves them before sending on, with a
 * trailing slash too, as the shipped nginx matches it).
 */
function isGatewayMetrics(url: string): boolean {
  const path = url.slice('/api'.length).split('?')[0] ?? '';
  let decoded: string;
  try {
    decoded = decodeURIComponent(path);
  } catch {
    return false; // the gateway refuses a malformed path itself
  }
  const resolved = withoutDotSegments(decoded);
  return resolved === '/metrics' || resolved === '/metrics/';
}

/** `path` with its `.` and `..` segments resolved (RFC 3986 §5.2.4, as WHATWG URL does). */
function withoutDotSegments(path: string): string {
  const segments: string[] = [];
  const parts = path.split('/');
  parts.forEach((segment, index) => {
    const last = index === parts.length - 1;
    if (segment === '.' || segment === '..') {
      if (segment === '..' && segments.length > 1) segments.pop();
      if (last) segments.push('');
    } else {
      segments.push(segment);
    }
  });
  return segments.join('/');
}

/**
 * Refuses, before the gateway sees it, its `/metrics` (a 404, as at the shipped balancers), and what it
 * would refuse and this server would hide: a header of {@link ONCE_HEADERS} sent twice (Node keeps the first, so the gateway would act on a guess), and an
 * `Upgrade` (`curl --http2` asks for h2c so): the gateway has no WebSocket, and the proxy would hold
 * the upgraded connection unanswered for ever.
 */
async function gatewayRefusals(request: FastifyRequest, reply: FastifyReply): Promise<void> {
  // The gateway's /metrics counts every tenant's traffic together: Prometheus scrapes it on the
  // gateway's own port, never through the public origin (as the shipped nginx and Ingress answer it).
  if (isGatewayMetrics(request.url)) {
    return reply.status(404).send({ error: 'Not found.', code: ErrorCode.NOT_FOUND });
  }
  const label = repeatedHeader(request.raw, ONCE_HEADERS);
  if (label !== undefined) {
    return reply
      .status(400)
      .header('connection', 'close')
      .send({
        error: `The request has the ${label} header more than once: send it once (which one counts would be a guess).`,
        code: ErrorCode.BAD_REQUEST,
      });
  }
  // Node takes off the chunks only: another coding's bytes would reach the gateway as the body.
  const coding = unsupportedTransferCoding(request.headers);
  if (coding !== undefined) {
    return reply
      .status(400)
      .header('connection', 'close')
      .send({
        error: `Transfer-Encoding ${JSON.stringify(coding)} is not supported: send the body as it is, or chunked alone.`,
        code: ErrorCode.BAD_REQUEST,
      });
  }
  // Node marks a request that came through its `upgrade` event (the WebSocket proxy listens to it).
  if ((request.raw as { upgrade?: boolean }).upgrade) {
    return reply
      .status(400)
      .header('connection', 'close')
      .send({
        error: `${request.url.split('?')[0]} takes no Upgrade (the gateway has no WebSocket; the realtime servers are at /socket.io): send it as plain HTTP/1.1.`,
        code: ErrorCode.BAD_REQUEST,
      });
  }
}

/**
 * One origin for the browser: `/api/*` → the gateway (prefix stripped: `/api/notify` is `/notify`),
 * `/socket.io/*` → the realtime servers, WebSocket upgrades included. Built on @fastify/http-proxy
 * (streams bodies both ways, keeps connections to the upstream alive, proxies upgrades with `ws`)
 * rather than a hand-written pipe. An upstream that does not answer is a JSON 503.
 */
export async function proxies(app: FastifyInstance, config: WebConfig): Promise<void> {
  const unavailable = (what: string) => ({
    onError(
      reply: { code(status: number): { header(name: string, value: string): { send(body: unknown): void } } },
      { error }: { error: Error },
    ) {
      reply
        .code(503)
        .header('retry-after', '1')
        .send({
          error: `The ${what} does not answer (${error.message}); retry shortly.`,
          code: ErrorCode.UNAVAILABLE,
        });
    },
    rewriteHeaders: endToEnd,
  });
  await app.register(async (gateway) => {
    gateway.addHook('onRequest', gatewayRefusals);
    await gateway.register(proxy, {
      upstream: config.gatewayUrl,
      prefix: '/api',
      rewritePrefix: '',
      replyOptions: {
        rewriteRequestHeaders: (request, headers) => ({
          ...headers,
          'x-forwarded-for': forwardedFor(request as FastifyRequest, headers),
        }),
        ...unavailable('gateway'),
      },
    });
  });
  await app.register(async (realtime) => {
    realtime.addHook('onRequest', realtimeUpgradeCheck(config.realtimeUrl));
    await realtime.register(proxy, {
      upstream: config.realtimeUrl,
      prefix: '/socket.io',
      rewritePrefix: '/socket.io',
      websocket: true,
      // Typed without it, but documented and read: the headers of the upstream WebSocket's handshake.
      wsClientOptions: {
        rewriteRequestHeaders: (headers: IncomingHttpHeaders, request: FastifyRequest) => ({
          ...headers,
          'x-forwarded-for': forwardedFor(request, request.headers),
        }),
      } as object,
      replyOptions: unavailable('realtime server'),
    });
  });
}

/** How long a WebSocket upgrade waits for the realtime server to take a TCP connection, ms. */
const UPSTREAM_CONNECT_MS = 2000;
/** How long a realtime server that took one is trusted to take the next without asking again, ms. */
const UPSTREAM_TRUSTED_MS = 1000;

/**
 * `onRequest` of `/socket.io/*`: a WebSocket upgrade is accepted only once the realtime server takes a
 * TCP connection (asked at most once a second while it does), else answered `503` with `Retry-After`.
 * @fastify/http-proxy accepts the upgrade before it connects upstream and closes the socket (1011) when
 * that fails, which socket.io-client does not take for a failed attempt: each attempt waited out its
 * connect timeout (the SDK's 10 s) while the realtime servers were down behind this server.
 */
function realtimeUpgradeCheck(realtimeUrl: string) {
  const target = new URL(realtimeUrl);
  const port = Number(target.port || (target.protocol === 'https:' ? 443 : 80));
  const host = target.hostname.replace(/^\[|\]$/g, '');
  let reachedAt = Number.NEGATIVE_INFINITY;
  const reachable = () =>
    new Promise<string | undefined>((resolve) => {
      const socket = connect({ host, port, timeout: UPSTREAM_CONNECT_MS });
      socket.once('connect', () => {
        socket.destroy();
        resolve(undefined);
      });
      socket.once('timeout', () => {
        socket.destroy();
        resolve(`no connection within ${UPSTREAM_CONNECT_MS} ms`);
      });
      socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
    });
  return async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    if (!(request.raw as { upgrade?: boolean }).upgrade) return;
    if (performance.now() - reachedAt < UPSTREAM_TRUSTED_MS) return;
    const problem = await reachable();
    if (problem === undefined) {
      reachedAt = performance.now();
      return;
    }
    return reply
      .status(503)
      .header('retry-after', '1')
      .header('connection', 'close')
      .send({
        error: `The realtime server does not answer (${problem}); retry shortly.`,
        code: ErrorCode.UNAVAILABLE,
      });
  };
}
