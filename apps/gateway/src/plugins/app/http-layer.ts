import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { closingAnswer, ONCE_HEADERS, repeatedHeader, unsupportedTransferCoding } from '@herald/config';
import type {
  FastifyError,
  FastifyHttpOptions,
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
} from 'fastify';
import fp from 'fastify-plugin';
import FindMyWay from 'find-my-way';
import { ErrorCode, HttpError } from '../../errors.js';

/**
 * How long a request may take to arrive, headers and body together. Bodies are at most 64 KB, so 10 s
 * is generous even at 10 KB/s; a client that sends slower (or never finishes) gets a 408 and the
 * connection is closed.
 */
export const REQUEST_TIMEOUT_MS = 10_000;
/** How long the request line and headers may take to arrive (a slowloris client is cut off here). */
export const HEADERS_TIMEOUT_MS = 5_000;
/**
 * How long an idle keep-alive connection stays open: above the 60 s idle timeout of common load
 * balancers (AWS ALB, nginx), so that the gateway never closes a connection they are about to reuse.
 */
export const KEEP_ALIVE_TIMEOUT_MS = 72_000;
/**
 * Longest path parameter, in characters once percent-decoded (the router measures it so): three times
 * the longest user id, so that the route's own schema, not the router, refuses a user id over 256 with a
 * 400 naming it. Fastify's default of 100 would refuse user ids that `POST /notify` accepts.
 */
export const MAX_PARAM_LENGTH = 3 * 256;

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'] as const;

/** Request headers that must come once: {@link ONCE_HEADERS}, and `Host` (RFC 9112 §3.2). */
const SINGLE_HEADERS = new Map([['host', 'Host'], ...ONCE_HEADERS]);

/**
 * Whether `request`'s body, read or not, is bounded: not chunked, and declared within `limit` bytes. Node
 * drains such a body after an answer given before it was read, and keeps the connection.
 */
export function boundedBody(request: FastifyRequest, limit: number): boolean {
  const { headers } = request.raw;
  return headers['transfer-encoding'] === undefined && Number(headers['content-length'] ?? 0) <= limit;
}

/** JSON of a Herald error, for answers written straight to the socket (no reply exists yet). */
const errorJson = (error: string, code: ErrorCode): string => JSON.stringify({ error, code });

/** A header value as an error message quotes it: JSON-escaped, long ones cut. */
const quoted = (value: string): string =>
  JSON.stringify(value.length > 100 ? `${value.slice(0, 100)}…` : value);

/** What is wrong, for the parser's (llhttp's) most common refusals; others get a general message. */
const PARSER_ERRORS: Record<string, string> = {
  HPE_INVALID_METHOD: 'Unknown or malformed method: the gateway serves GET, HEAD, POST, PUT and DELETE.',
  HPE_INVALID_URL:
    'Malformed request target: a path holds only printable ASCII; percent-encode anything else (encodeURIComponent).',
  HPE_INVALID_HEADER_TOKEN:
    'Malformed header: a header name is a token directly followed by ":" (no space before it), values hold no control characters, and lines are not folded.',
  HPE_INVALID_VERSION:
    'Malformed request line: send "<METHOD> <path> HTTP/1.1", every line ending with CRLF.',
  HPE_CR_EXPECTED: 'Malformed line ending: end every line of the request line and headers with CRLF.',
  HPE_LF_EXPECTED: 'Malformed line ending: end every line of the request line and headers with CRLF.',
  HPE_INVALID_CONTENT_LENGTH: 'Invalid Content-Length: send one, as a plain decimal number of bytes.',
  HPE_UNEXPECTED_CONTENT_LENGTH:
    'Invalid Content-Length: send one, with the same value, and never with Transfer-Encoding: chunked.',
  HPE_INVALID_TRANSFER_ENCODING:
    'Unsupported Transfer-Encoding: send the body with Content-Length, or chunked alone.',
  HPE_INVALID_CHUNK_SIZE: 'Malformed chunked body: each chunk opens with its size in hexadecimal and CRLF.',
};

/**
 * Errors Node's HTTP parser raises before any route runs (malformed request line or headers, bad
 * chunked encoding, headers too large, a request that took too long): answered with Herald's JSON
 * shape, then the connection is closed (its stream cannot be trusted any more).
 */
function clientErrorHandler(this: FastifyInstance, error: NodeJS.ErrnoException, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  let status: number;
  let body: string;
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    status = 408;
    body = errorJson(
      `The request did not arrive in time (headers within ${HEADERS_TIMEOUT_MS / 1000} s, all of it within ${REQUEST_TIMEOUT_MS / 1000} s): send it again, faster.`,
      ErrorCode.REQUEST_TIMEOUT,
    );
  } else if (error.code === 'HPE_HEADER_OVERFLOW') {
    status = 431;
    body = errorJson(
      'The request line and headers are larger than 16 KB: send a shorter URL (query string included) or fewer, shorter headers.',
      ErrorCode.HEADERS_TOO_LARGE,
    );
  } else if (error.code === 'HPE_INVALID_EOF_STATE') {
    // The client half-closed (or the connection ended) inside the request.
    status = 400;
    body = errorJson(
      'The request ended before its headers or its body were complete (as long as its Content-Length or chunks say): send all of it.',
      ErrorCode.BAD_REQUEST,
    );
  } else {
    status = 400;
    body = errorJson(
      `${PARSER_ERRORS[error.code ?? ''] ?? 'Malformed HTTP request: check the request line, headers and chunked encoding.'} (${error.code ?? 'parse error'})`,
      ErrorCode.BAD_REQUEST,
    );
  }
  this.log.debug({ err: error }, 'client error');
  if (socket.writable) socket.write(closingAnswer(status, body));
  socket.destroy(error);
}

/** Errors Fastify's router raises before a route runs, in Herald's shape. */
function frameworkErrors(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  if (error.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    void reply.code(414).send({
      error: `A path parameter of ${request.url.split('?')[0]} is longer than ${MAX_PARAM_LENGTH} characters.`,
      code: ErrorCode.URI_TOO_LONG,
    });
    return;
  }
  // Closed after the answer, as the other malformed requests are (a body sent with it is not read on).
  void reply
    .code(400)
    .header('connection', 'close')
    .send({
      error: `Malformed path ${JSON.stringify(request.url.split('?')[0])}: check its percent-encoding.`,
      code: ErrorCode.BAD_REQUEST,
    });
}

/**
 * Fastify options of the HTTP layer: timeouts, path parameter length, and Herald-shaped answers to
 * what Node and the router refuse before Herald's code runs.
 */
export const httpServerOptions = {
  requestTimeout: REQUEST_TIMEOUT_MS,
  keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
  // Node checks request and headers timeouts every `connectionsCheckingInterval` (30 s by default,
  // which would let a slow client hold a connection for up to 40 s): every second instead.
  // Node answers an HTTP/1.1 request without Host itself, with an empty 400: the app hook below answers
  // it in Herald's shape instead.
  http: { headersTimeout: HEADERS_TIMEOUT_MS, connectionsCheckingInterval: 1000, requireHostHeader: false },
  routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
  // Fastify answers a request that reaches a closing server `503 { statusCode, error, message }`, without
  // Herald's `code` or a `Retry-After`: the app hook below answers it in Herald's shape instead.
  return503OnClosing: false,
  clientErrorHandler,
  frameworkErrors,
} satisfies FastifyHttpOptions<Server>;

/**
 * App hooks of the HTTP layer:
 * - a request answered before its body was read (a 401 from `onRequest`, a 429 from the sender
 *   precheck in `preParsing`) whose body is chunked or declared over the body limit gets
 *   `Connection: close`, so Node closes the connection after the answer instead of reading an
 *   unbounded body to reuse it;
 * - an unknown path is a 404, a known path with another method a 405 with `Allow`, both JSON, answered
 *   in `onRequest`, before the body is parsed (a wrong path is not told about a body no route reads);
 * - a header that must come once ({@link SINGLE_HEADERS}) sent more than once is a 400 naming it, and
 *   so is a `Transfer-Encoding` other than `chunked` alone (Node decodes no other coding);
 * - a request that reaches the gateway while it shuts down (on a keep-alive connection) is a 503
 *   `HERALD_ERR_UNAVAILABLE` with `Retry-After`, nothing accepted, the connection closed after it;
 * - what Node's HTTP server would refuse itself with an empty body, or by closing the connection without
 *   a word, is answered in Herald's shape: an HTTP/1.1 request without `Host` (400, connection closed;
 *   RFC 9112 §3.2), an `Expect` other than `100-continue` (417; `100-continue` still gets its
 *   `100 Continue` from Node), and `CONNECT` (405: the gateway is no proxy; connection closed). An
 *   `Upgrade` needs no answer: with no `upgrade` listener Node serves the request as plain HTTP. A
 *   client's half-close ends no request: it is answered (Node would drop the answer).
 * Register before every other plugin that declares routes (it learns them from `onRoute`) or answers in
 * `onRequest` (its `onRequest` hook must run first).
 */
export default fp(
  async (app: FastifyInstance) => {
    const known = FindMyWay();
    const seen = new Set<string>();
    app.addHook('onRoute', (route) => {
      const methods = Array.isArray(route.method) ? route.method : [route.method];
      for (const method of methods) {
        const id = `${method} ${route.url}`;
        if (seen.has(id) || !(METHODS as readonly string[]).includes(method)) continue;
        seen.add(id);
        known.on(method as (typeof METHODS)[number], route.url, () => {});
      }
    });
    const allowedOn = (path: string) => METHODS.filter((method) => known.find(method, path) !== null);
    /**
     * A 405 with `Allow` when the path exists with other methods, else a 404: also when it exists with
     * this one, and its route found nothing (`reply.callNotFound()`: a file missing under `/docs/static/*`).
     */
    const unrouted = (request: FastifyRequest): HttpError => {
      const path = request.url.split('?')[0] ?? '/';
      const allowed = allowedOn(path);
      return allowed.length > 0 && !(allowed as string[]).includes(request.method)
        ? new HttpError(
            ErrorCode.METHOD_NOT_ALLOWED,
            `${request.method} is not allowed on ${path}: use ${allowed.join(' or ')}.`,
            { headers: { Allow: allowed.join(', ') } },
          )
        : new HttpError(ErrorCode.NOT_FOUND, `No route ${request.method} ${path}${slashHint(path)}`);
    };

    // Node answers an `Expect` other than 100-continue with an empty 417 unless this event has a
    // listener: the request goes to Fastify as any other, marked, and the hook below answers it.
    const unmetExpectations = new WeakSet<IncomingMessage>();
    // A client may half-close its side once its request is sent: that ends no request (RFC 9112 §9.6),
    // yet Node's HTTP server aborts it and ends the connection unanswered (its default), although the
    // route still runs: a 202 whose notification was accepted would be lost, and a retry without an
    // Idempotency-Key would deliver twice. Set, Node answers, then closes the connection.
    (app.server as Server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
    app.server.on('checkExpectation', (request: IncomingMessage, response: ServerResponse) => {
      unmetExpectations.add(request);
      app.server.emit('request', request, response);
    });
    // Set once the gateway is closing (Fastify runs `preClose` after it stops routing to new
    // connections): what still arrives on an open keep-alive connection is refused, nothing accepted.
    let closing = false;
    app.addHook('preClose', (done) => {
      closing = true;
      done();
    });
    app.addHook('onRequest', (request, _reply, done) => {
      const raw = request.raw;
      if (closing) {
        done(
          new HttpError(
            ErrorCode.UNAVAILABLE,
            'The gateway is shutting down; nothing was accepted. Retry: another instance will take it.',
            { headers: { 'Retry-After': '1', Connection: 'close' } },
          ),
        );
        return;
      }
      if (raw.headers.host === undefined && raw.httpVersionMajor === 1 && raw.httpVersionMinor === 1) {
        done(
          new HttpError(
            ErrorCode.BAD_REQUEST,
            'An HTTP/1.1 request needs a Host header: send "Host: <the gateway\'s host[:port]>".',
            { headers: { Connection: 'close' } },
          ),
        );
        return;
      }
      if (unmetExpectations.has(raw)) {
        done(
          new HttpError(
            ErrorCode.EXPECTATION_FAILED,
            `Unsupported Expect ${quoted(String(raw.headers.expect))}: the gateway meets only "100-continue"; send the request without this header.`,
          ),
        );
        return;
      }
      const coding = unsupportedTransferCoding(raw.headers);
      if (coding !== undefined) {
        done(
          new HttpError(
            ErrorCode.BAD_REQUEST,
            `Unsupported Transfer-Encoding ${quoted(coding)}: send the body chunked alone, or with Content-Length (and uncompressed).`,
            { headers: { Connection: 'close' } },
          ),
        );
        return;
      }
      const repeated = repeatedHeader(raw, SINGLE_HEADERS);
      if (repeated !== undefined) {
        done(
          new HttpError(
            ErrorCode.BAD_REQUEST,
            `The request has the ${repeated} header more than once: send it once (which one counts would be a guess).`,
            { headers: { Connection: 'close' } },
          ),
        );
        return;
      }
      // No route: answered before the body is parsed, so that a wrong path or method is told as such
      // rather than as a problem of a body no route would read (and the body is not read).
      done(request.is404 ? unrouted(request) : undefined);
    });

    // Node closes a CONNECT's connection without a word unless this event has a listener. The socket is
    // the client's raw connection now, out of Node's HTTP handling: answer on it and close it.
    app.server.on('connect', (request: IncomingMessage, socket: Duplex) => {
      socket.on('error', () => {});
      const target = request.url ?? '';
      const path = target.startsWith('/') ? (target.split('?')[0] ?? '/') : undefined;
      const allowed = path === undefined ? [] : allowedOn(path);
      const body = errorJson(
        allowed.length > 0
          ? `CONNECT is not allowed on ${path}: use ${allowed.join(' or ')}.`
          : `CONNECT ${quoted(target)} is not supported: the gateway is not a proxy; send requests to its own paths (e.g. POST /notify).`,
        ErrorCode.METHOD_NOT_ALLOWED,
      );
      app.log.debug({ method: 'CONNECT', url: target }, 'CONNECT refused');
      socket.end(closingAnswer(405, body, `Allow: ${allowed.join(', ')}\r\n`), () => socket.destroy());
    });

    const bodyLimit = app.initialConfig.bodyLimit ?? 1024 * 1024;
    app.addHook('onSend', (request, reply, payload, done) => {
      // A body within the body limit is drained by Node to keep the connection (bounded work, and a
      // keep-alive client refused with a small body does not pay a new connection); a chunked body or a
      // declared length over the limit is not read: the connection closes after the answer. `complete`
      // is false until the message has been read to its end (undefined under `inject()`: no socket).
      if (!boundedBody(request, bodyLimit) && request.raw.complete === false)
        reply.header('Connection', 'close');
      done(null, payload);
    });

    // Reached only through `reply.callNotFound()`: the `onRequest` hook above answers unrouted requests.
    app.setNotFoundHandler((request, reply) => {
      void reply.send(unrouted(request));
    });
  },
  { name: 'http-layer', fastify: '5.x' },
);

/**
 * Topic names and user ids may contain `/`, which a path must carry percent-encoded: `/topics/a/b/subscribers`
 * is no route, and a caller who wrote it so is told how to send it (`/topics/a%2Fb/subscribers`).
 */
function slashHint(path: string): string {
  const split = [
    /^\/topics\/[^/]+\/.+\/subscribers(\/[^/]+)?$/, // the topic's
    /^\/topics\/[^/]+\/subscribers\/[^/]+\/.+$/, // the user id's
    /^\/users\/[^/]+\/.+\/(notifications(\/read)?|preferences(\/mutes)?)$/,
  ];
  return split.some((route) => route.test(path))
    ? ' (a topic name or user id that contains / goes percent-encoded in the path, as %2F: encodeURIComponent)'
    : '';
}
