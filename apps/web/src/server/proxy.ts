import type { IncomingHttpHeaders } from 'node:http';
import proxy from '@fastify/http-proxy';
import { ErrorCode } from '@herald/protocol';
import type { FastifyInstance, FastifyRequest } from 'fastify';
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

/**
 * One origin for the browser: `/api/*` → the gateway (prefix stripped: `/api/notify` is `/notify`),
 * `/socket.io/*` → the realtime servers, WebSocket upgrades included. Built on @fastify/http-proxy
 * (streams bodies both ways, keeps connections to the upstream alive, proxies upgrades with `ws`)
 * rather than a hand-written pipe. An upstream that does not answer is a JSON 503.
 */
export async function proxies(app: FastifyInstance, config: WebConfig): Promise<void> {
  const unavailable = (what: string) => ({
    onError(reply: { code(status: number): { send(body: unknown): void } }, { error }: { error: Error }) {
      reply.code(503).send({
        error: `The ${what} does not answer (${error.message}); retry shortly.`,
        code: ErrorCode.UNAVAILABLE,
      });
    },
  });
  await app.register(proxy, {
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
  await app.register(proxy, {
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
}
