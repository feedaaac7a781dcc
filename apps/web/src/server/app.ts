import { existsSync } from 'node:fs';
import { join } from 'node:path';
import fastifyStatic from '@fastify/static';
import { createLogger } from '@herald/config';
import { ErrorCode, errorSpec } from '@herald/protocol';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyRequest,
  LogController,
} from 'fastify';
import type { WebConfig } from './config.js';
import { devTokenRoute } from './dev-token.js';
import { clientErrorHandler, frameworkErrors } from './http-errors.js';
import { proxies } from './proxy.js';

/** @fastify/http-proxy's error for a path that would leave its prefix. */
const PROXY_REFUSED_PATH = 'source/request contain invalid characters';

/**
 * Why @fastify/http-proxy refused `url` (a `..` segment, `%2e%2e` too; an empty segment right after the
 * prefix, which would make the rest a host; or no plain path at all), and which upstream's path to send.
 */
function refusedPathMessage(url: string): string {
  const path = url.split('?')[0] ?? '';
  const realtime = path.startsWith('/socket.io');
  const rest = path.slice(realtime ? '/socket.io'.length : '/api'.length);
  let decoded: string | undefined;
  try {
    decoded = decodeURIComponent(rest).replaceAll('\\', '/');
  } catch {
    decoded = undefined;
  }
  const what =
    decoded === undefined
      ? 'a malformed %-escape'
      : decoded.split('/').includes('..')
        ? "a '..' segment"
        : decoded.startsWith('//')
          ? `an empty segment after ${realtime ? '/socket.io' : '/api'}`
          : 'what is no plain path (a scheme, a backslash)';
  const upstream = realtime
    ? "the realtime server's path as it is, e.g. /socket.io/?EIO=4&transport=websocket"
    : "the gateway's path as it is, e.g. /api/notify";
  return `The path ${JSON.stringify(path.slice(0, 200))} has ${what}: send ${upstream}.`;
}

import { readiness } from './readiness.js';

/**
 * Assets Vite names by content hash (`/assets/index-3f2a….js`): cached for a year, never revalidated.
 * Everything else, the pages and `/element/herald-inbox.js` (a fixed name other sites embed), is
 * revalidated on every load (an ETag makes that a 304).
 */
const HASHED = /^\/assets\//;

/**
 * One log line per request, when it completes (Fastify writes one as it comes in too: two lines per
 * request, probes included); the incoming one at `debug`, for a request that never completes.
 */
class CompletedRequestsOnly extends LogController {
  override incomingRequest(request: FastifyRequest): void {
    if (this.isLogDisabled(request)) return;
    request.log.debug({ req: request }, 'incoming request');
  }
}

/**
 * The web server: the built pages (`config.publicDir`), the gateway under `/api/*` and the realtime
 * servers under `/socket.io/*` (WebSocket upgrades included), so that a browser sees one origin and
 * needs no CORS; `/healthz`, `/readyz`; and, in development mode only, `POST /dev/token`. Builds the
 * app and never listens (`server.ts` does).
 *
 * @example
 * ```ts
 * const app = await buildWebServer(loadConfig());
 * await app.listen({ port: 3003 });
 * ```
 */
export async function buildWebServer(config: WebConfig): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: createLogger(config.log, 'web') as FastifyBaseLogger,
    logController: new CompletedRequestsOnly(),
    // The same slow-client bounds as the gateway: headers within 5 s, a whole request within 10 s,
    // checked every second (Node's defaults: headers within 60 s, checked every 30 s).
    requestTimeout: 10_000,
    // Node answers an HTTP/1.1 request without Host with an empty 400: the hook below answers it.
    http: { headersTimeout: 5_000, connectionsCheckingInterval: 1000, requireHostHeader: false },
    // Fastify answers a request that reaches a closing server `503 { statusCode, error, message }`,
    // without Herald's `code` or a `Retry-After`: the hook below answers it instead.
    return503OnClosing: false,
    // A field the schema does not know (`userid` for `userId`) is refused, as by the gateway, not
    // dropped (Fastify's default), which would mint a token for the demo user instead.
    ajv: { customOptions: { removeAdditional: false } },
    keepAliveTimeout: 72_000,
    bodyLimit: 64 * 1024,
    // What Node's parser and Fastify's router refuse, in Herald's shape too.
    clientErrorHandler,
    frameworkErrors,
  });

  // The methods of each route of a fixed path (`/healthz`, `/dev/token`), for the 405s below. The
  // proxies take every method; the pages' files are found by asking the static route itself.
  const fixedRoutes = new Map<string, string[]>();
  app.addHook('onRoute', (route) => {
    if (/[*:]/.test(route.url)) return;
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    fixedRoutes.set(route.url, [...new Set([...(fixedRoutes.get(route.url) ?? []), ...methods])]);
  });

  // Every answer: no MIME sniffing. No other site may frame a page (the dashboard takes the admin key;
  // a framed page could be clicked through unseen).
  // Set once the server drains (Fastify runs `preClose` after it stops routing new connections): what
  // still arrives on an open keep-alive connection is sent elsewhere.
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-content-type-options', 'nosniff');
    reply.header('content-security-policy', "frame-ancestors 'none'");
    reply.header('x-frame-options', 'DENY');
    const { raw } = request;
    if (raw.headers.host === undefined && raw.httpVersionMajor === 1 && raw.httpVersionMinor === 1) {
      return reply.status(400).header('connection', 'close').send({
        error: 'An HTTP/1.1 request needs a Host header: send "Host: <this server\'s host[:port]>".',
        code: ErrorCode.BAD_REQUEST,
      });
    }
    if (closing) {
      return reply.status(503).headers({ 'retry-after': '1', connection: 'close' }).send({
        error:
          'The web server is shutting down; nothing was forwarded. Retry: another instance will take it.',
        code: ErrorCode.UNAVAILABLE,
      });
    }
  });

  app.setErrorHandler((error: Error & { statusCode?: number; validation?: unknown }, request, reply) => {
    const status = error.statusCode ?? 500;
    if (error.validation) {
      return reply
        .status(400)
        .send({ error: `Invalid request: ${error.message}`, code: ErrorCode.VALIDATION });
    }
    if (status === 403) {
      // Only the static files refuse on their own (a path that leaves the pages' folder: `..`): there is
      // no file there to serve, as for any other path that has none.
      return reply.status(404).send({
        error: `Not found: ${request.method} ${request.url.split('?')[0]}; the inbox page is at /`,
        code: ErrorCode.NOT_FOUND,
      });
    }
    if (status >= 500) {
      request.log.error({ err: error }, 'request failed');
      return reply
        .status(500)
        .send({ error: errorSpec(ErrorCode.INTERNAL).message, code: ErrorCode.INTERNAL });
    }
    if (status === 413) {
      return reply.status(413).send({
        error: 'The request body is over 64 KB: send a smaller one.',
        code: ErrorCode.BODY_TOO_LARGE,
      });
    }
    if (status === 415) {
      return reply.status(415).send({
        error: errorSpec(ErrorCode.UNSUPPORTED_MEDIA_TYPE).message,
        code: ErrorCode.UNSUPPORTED_MEDIA_TYPE,
      });
    }
    if (error.message === PROXY_REFUSED_PATH) {
      // @fastify/http-proxy's own refusal of a path that would leave its prefix: named as it is.
      return reply.status(400).send({ error: refusedPathMessage(request.url), code: ErrorCode.BAD_REQUEST });
    }
    return reply.status(status).send({ error: error.message, code: ErrorCode.BAD_REQUEST });
  });
  // A path served with other methods is a 405 naming them (`Allow`), as at the gateway: a fixed route's,
  // or GET and HEAD where a page or file is (a HEAD of the same path, asked of this server, finds it).
  // Anything else is a 404, whatever the method.
  app.setNotFoundHandler(async (request, reply) => {
    const path = request.url.split('?')[0] ?? '/';
    let allowed = fixedRoutes.get(path) ?? [];
    if (allowed.length === 0 && request.method !== 'GET' && request.method !== 'HEAD') {
      const probe = await app.inject({ method: 'HEAD', url: path });
      if (probe.statusCode < 400) allowed = ['GET', 'HEAD'];
    }
    if (allowed.length > 0 && !allowed.includes(request.method)) {
      return reply
        .status(405)
        .header('allow', allowed.join(', '))
        .send({
          error: `${request.method} is not allowed on ${path}: use ${allowed.join(' or ')}.`,
          code: ErrorCode.METHOD_NOT_ALLOWED,
        });
    }
    return reply.status(404).send({
      error: `Not found: ${request.method} ${path}; the inbox page is at /`,
      code: ErrorCode.NOT_FOUND,
    });
  });

  app.get('/healthz', async () => ({ status: 'ok', service: 'web' }));
  app.get(
    '/readyz',
    readiness(config, () => existsSync(join(config.publicDir, 'index.html'))),
  );

  await app.register(proxies, config);
  if (config.demo) await app.register(devTokenRoute, { gatewayUrl: config.gatewayUrl, ...config.demo });

  await app.register(fastifyStatic, {
    root: config.publicDir,
    // Pages and the element are revalidated on every load; hashed assets never need to be.
    setHeaders(reply, path) {
      const file = path.slice(config.publicDir.length).replaceAll('\\', '/');
      reply.header('cache-control', HASHED.test(file) ? 'public, max-age=31536000, immutable' : 'no-cache');
      // Other sites embed the element with <script type="module">, which is fetched in CORS mode.
      if (file.startsWith('/element/')) reply.header('access-control-allow-origin', '*');
    },
    // /dashboard → dashboard.html, like / → index.html.
    extensions: ['html'],
  });
  return app;
}
