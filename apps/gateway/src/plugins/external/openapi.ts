import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { ErrorCode, ErrorResponse, WebhookEventBody } from '@herald/protocol';
import type { FastifyInstance, RouteOptions } from 'fastify';
import fp from 'fastify-plugin';
import { HEADERS_TIMEOUT_MS, MAX_PARAM_LENGTH, REQUEST_TIMEOUT_MS } from '../app/http-layer.js';

/** What the gateway adds to a route's answers, beyond its own schema: learnt from its options. */
interface RouteTraits {
  authenticated: boolean;
  /** Behind the operator's `HERALD_ADMIN_KEY` (`app.authenticateAdmin`). */
  admin: boolean;
  rateLimited: boolean;
  idempotent: boolean;
  hasBody: boolean;
  hasParams: boolean;
}

type Header = { description: string; schema: Record<string, unknown> };
type Response = { description: string; headers?: Record<string, Header>; content?: Record<string, unknown> };
type Operation = { responses?: Record<string, Response>; security?: unknown[] };
type Document = {
  paths?: Record<string, Record<string, Operation>>;
  components?: Record<string, unknown>;
  info?: { description?: string };
};

/** Every header the gateway sets itself, as documented. */
export const HERALD_HEADERS: Record<string, Header> = {
  RateLimit: {
    description:
      'draft-ietf-httpapi-ratelimit-headers-11: `"<policy>";r=<remaining>;t=<seconds until full>` per policy; on a 429 the refusing policy\'s `t` is its `Retry-After`.',
    schema: { type: 'string', example: '"sender";r=199;t=1, "recipient";r=9;t=1' },
  },
  'RateLimit-Policy': {
    description:
      'draft-ietf-httpapi-ratelimit-headers-11: `"<policy>";q=<burst>;w=<seconds to refill>` per policy.',
    schema: { type: 'string', example: '"sender";q=200;w=2, "recipient";q=10;w=1' },
  },
  'Retry-After': {
    description: 'Whole seconds (rounded up) before a retry can succeed.',
    schema: { type: 'integer', minimum: 1, example: 1 },
  },
  'Idempotency-Replayed': {
    description:
      'Set on the stored first answer replayed for a repeated Idempotency-Key; nothing was enqueued.',
    schema: { type: 'string', enum: ['true'] },
  },
  'WWW-Authenticate': {
    description:
      'How to authenticate: `Bearer realm="herald"` (with `error="invalid_token"` for an unknown key).',
    schema: { type: 'string', example: 'Bearer realm="herald"' },
  },
  'Accept-Encoding': {
    description: 'With a 415 for a Content-Encoding: the gateway reads bodies uncompressed only.',
    schema: { type: 'string', enum: ['identity'] },
  },
  Allow: {
    description: 'With a 405: the methods the path serves.',
    schema: { type: 'string', example: 'POST' },
  },
};

const json = { 'application/json': { schema: ErrorResponse } };
const error = (description: string, headers: string[] = []): Response => ({
  description,
  content: json,
  ...(headers.length > 0
    ? { headers: Object.fromEntries(headers.map((name) => [name, HERALD_HEADERS[name] as Header])) }
    : {}),
});

/** Answers any path may get, before or without a route: in `components.responses`. */
const COMMON_RESPONSES: Record<string, Response> = {
  BadRequest: error(
    `Malformed HTTP (request line, headers, chunked encoding, an HTTP/1.1 request without \`Host\`, a \`Host\`, \`Authorization\`, \`Content-Type\` or \`Idempotency-Key\` header sent more than once, a \`Transfer-Encoding\` other than \`chunked\`) or path: \`${ErrorCode.BAD_REQUEST}\`.`,
  ),
  NotFound: error(`No route for this path: \`${ErrorCode.NOT_FOUND}\`.`),
  MethodNotAllowed: error(
    `The path exists with other methods (\`Allow\`), or \`CONNECT\` (the gateway is no proxy): \`${ErrorCode.METHOD_NOT_ALLOWED}\`.`,
    ['Allow'],
  ),
  ExpectationFailed: error(`An \`Expect\` other than \`100-continue\`: \`${ErrorCode.EXPECTATION_FAILED}\`.`),
  RequestTimeout: error(
    `Headers not received within ${HEADERS_TIMEOUT_MS / 1000} s, or the whole request within ${REQUEST_TIMEOUT_MS / 1000} s: \`${ErrorCode.REQUEST_TIMEOUT}\`; the connection is closed.`,
  ),
  UriTooLong: error(`A path parameter over ${MAX_PARAM_LENGTH} characters: \`${ErrorCode.URI_TOO_LONG}\`.`),
  HeadersTooLarge: error(
    `Request line and headers over 16 KB (a URL that long included): \`${ErrorCode.HEADERS_TOO_LARGE}\`.`,
  ),
};

/** Adds `response` for `status` unless the route documents it already; adds `headers` to it either way. */
function ensure(operation: Operation, status: string, response: Response, headers: string[] = []): void {
  operation.responses ??= {};
  const existing = operation.responses[status] ?? response;
  operation.responses[status] = existing;
  for (const name of headers) {
    existing.headers ??= {};
    existing.headers[name] ??= HERALD_HEADERS[name] as Header;
  }
}

/** Completes one operation with what the gateway's hooks send on top of the route's own schema. */
function complete(operation: Operation, traits: RouteTraits): void {
  if (traits.admin) {
    operation.security = [{ adminKey: [] }];
    ensure(
      operation,
      '401',
      error(
        `Missing admin key, or not HERALD_ADMIN_KEY (a tenant API key never is): \`${ErrorCode.UNAUTHORIZED}\`.`,
      ),
      ['WWW-Authenticate'],
    );
    ensure(
      operation,
      '404',
      error(`The admin API is off (no HERALD_ADMIN_KEY): \`${ErrorCode.ADMIN_DISABLED}\`.`),
    );
    ensure(operation, '503', error(`Redis unavailable or too slow: \`${ErrorCode.UNAVAILABLE}\`.`), [
      'Retry-After',
    ]);
  } else if (!traits.authenticated) operation.security = [];
  ensure(operation, '500', error(`A defect in the gateway (never bad input): \`${ErrorCode.INTERNAL}\`.`));
  if (traits.hasParams) ensure(operation, '414', { $ref: '#/components/responses/UriTooLong' } as never);
  if (traits.hasBody) {
    ensure(operation, '400', error('Invalid body or header: `details` names the field.'));
    ensure(operation, '413', error(`Body over 64 KB: \`${ErrorCode.BODY_TOO_LARGE}\`.`));
    ensure(
      operation,
      '415',
      error(
        `Not JSON, a charset other than UTF-8, or a body with a Content-Encoding: \`${ErrorCode.UNSUPPORTED_MEDIA_TYPE}\`.`,
        ['Accept-Encoding'],
      ),
    );
  }
  if (traits.authenticated) {
    ensure(operation, '401', error(`Missing, unknown or revoked API key: \`${ErrorCode.UNAUTHORIZED}\`.`), [
      'WWW-Authenticate',
    ]);
    ensure(operation, '503', error(`Redis unavailable or too slow: \`${ErrorCode.UNAVAILABLE}\`.`), [
      'Retry-After',
    ]);
  }
  if (traits.idempotent) {
    ensure(operation, '409', error('The same Idempotency-Key is still in flight.'), ['Retry-After']);
    for (const status of Object.keys(operation.responses ?? {})) {
      if (status.startsWith('2')) ensure(operation, status, { description: '' }, ['Idempotency-Replayed']);
    }
  }
  if (traits.rateLimited) {
    ensure(operation, '429', error(`Rate limit exceeded: \`${ErrorCode.RATE_LIMITED}\`.`), ['Retry-After']);
    for (const [status, response] of Object.entries(operation.responses ?? {})) {
      if ('$ref' in response || ['401', '413', '415', '500'].includes(status)) continue;
      ensure(operation, status, response, ['RateLimit-Policy', 'RateLimit']);
    }
  }
}

/**
 * Swagger (`/openapi.json`, `/docs`) from the route schemas, made true to what the gateway sends: the
 * answers and headers its hooks add (authentication, limits, idempotency, body parsing, the HTTP
 * layer) are added to each operation, learnt from the route's options; public routes are marked as
 * needing no API key.
 */
export default fp(
  async (app: FastifyInstance) => {
    const traits = new Map<string, RouteTraits>();
    app.addHook('onRoute', (route: RouteOptions) => {
      const methods = Array.isArray(route.method) ? route.method : [route.method];
      const onRequest = [route.onRequest ?? []].flat();
      const schema = (route.schema ?? {}) as {
        body?: unknown;
        params?: unknown;
        headers?: { properties?: object };
      };
      for (const method of methods) {
        traits.set(`${method.toLowerCase()} ${route.url.replace(/:(\w+)/g, '{$1}')}`, {
          authenticated: onRequest.includes(app.authenticate),
          admin: onRequest.includes(app.authenticateAdmin),
          rateLimited: route.config?.rateLimit !== undefined,
          idempotent:
            schema.headers?.properties !== undefined && 'idempotency-key' in schema.headers.properties,
          // Fastify parses a body sent with any of these methods, whether the route reads one or not.
          hasBody: schema.body !== undefined || ['POST', 'PUT', 'PATCH', 'DELETE'].includes(method),
          hasParams: schema.params !== undefined,
        });
      }
    });

    await app.register(swagger, {
      openapi: {
        openapi: '3.0.3',
        info: {
          title: 'Herald gateway',
          version: '0.1.0',
          description: [
            'Send real-time notifications: authenticated, rate-limited, durably queued.',
            '',
            'Every error is JSON `{ "error", "code", "details"? }`. Before any route runs, any path may also answer: 400 (malformed HTTP, no `Host`), 404 (no route), 405 (another method, with `Allow`), 408 (too slow), 414 (path parameter too long), 417 (an `Expect` other than `100-continue`), 431 (headers too large): see `components.responses`.',
          ].join('\n'),
        },
        components: {
          securitySchemes: {
            apiKey: { type: 'http', scheme: 'bearer', description: 'Authorization: Bearer <api key>' },
            adminKey: {
              type: 'http',
              scheme: 'bearer',
              description: 'Authorization: Bearer <HERALD_ADMIN_KEY>: the operator, for /admin/* only',
            },
          },
          responses: COMMON_RESPONSES as never,
          // What delivery webhooks POST (OpenAPI 3.0 has no `webhooks` section).
          schemas: { WebhookEvent: WebhookEventBody as never },
        },
        security: [{ apiKey: [] }],
      },
      transformObject: (documentObject) => {
        const document = (documentObject as { openapiObject: Document }).openapiObject;
        for (const [path, operations] of Object.entries(document.paths ?? {})) {
          for (const [method, operation] of Object.entries(operations)) {
            const known = traits.get(`${method} ${path}`);
            if (known) complete(operation, known);
          }
        }
        return document as never;
      },
    });
    await app.register(swaggerUi, { routePrefix: '/docs' });
    app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  },
  { name: 'openapi', fastify: '5.x' },
);
