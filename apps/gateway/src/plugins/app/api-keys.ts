import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { type ApiKeyIdentity, ApiKeyStore } from '../../api-keys.js';
import { ErrorCode, HttpError, unavailable } from '../../errors.js';

/** A route's `onRequest` hook (callback style: no promise per request). */
type OnRequest = (request: FastifyRequest, reply: FastifyReply, done: (error?: Error) => void) => void;

declare module 'fastify' {
  interface FastifyInstance {
    apiKeys: ApiKeyStore;
    /** Route `onRequest` hook: `Authorization: Bearer <api key>` or a 401. */
    authenticate: OnRequest;
  }
  interface FastifyRequest {
    /** The caller, set by `authenticate`. */
    apiKey?: ApiKeyIdentity;
    /**
     * The caller, on a route that runs `authenticate` (its `onRequest`); reading it on any other route
     * is a programming error and throws.
     */
    readonly identity: ApiKeyIdentity;
  }
}

/**
 * API keys (environment and Redis), `app.authenticate` for routes to put in their `onRequest`, and
 * {@link FastifyRequest.identity}: the authenticated caller, typed once.
 */
export default fp(
  async (app: FastifyInstance) => {
    const { config } = app;
    const apiKeys = new ApiKeyStore({
      redis: app.redis,
      keyPrefix: config.keyPrefix,
      cacheMs: config.apiKeyCacheMs,
      envKeys: config.apiKeys,
    });
    app.decorate('apiKeys', apiKeys);
    app.decorate('authenticate', createApiKeyAuth(apiKeys, app.withRedisTimeout));
    app.decorateRequest('apiKey', undefined);
    app.decorateRequest('identity', {
      getter(this: FastifyRequest): ApiKeyIdentity {
        const identity = this.apiKey;
        if (identity === undefined) throw new Error('request.identity read on a route without authenticate');
        return identity;
      },
    });
  },
  { name: 'api-keys', dependencies: ['config', 'redis'], fastify: '5.x' },
);

/**
 * An `onRequest` hook that accepts `Authorization: Bearer <api key>` when the key is known and not
 * revoked, and sets `request.apiKey`; anything else is a 401 JSON error.
 */
function createApiKeyAuth(
  store: ApiKeyStore,
  withTimeout: <T>(promise: Promise<T>) => Promise<T>,
): OnRequest {
  const accept = (request: FastifyRequest, identity: ApiKeyIdentity | undefined): Error | undefined => {
    if (!identity) {
      return new HttpError(
        ErrorCode.UNAUTHORIZED,
        'Unknown or revoked API key: check the key or ask an operator for one.',
        { headers: { 'WWW-Authenticate': 'Bearer realm="herald", error="invalid_token"' } },
      );
    }
    request.apiKey = identity;
    return undefined;
  };
  // Callback style: a key from the environment or the cache is accepted with no promise at all.
  return (request, _reply, done) => {
    const token = bearerToken(request);
    if (token === undefined) {
      done(
        new HttpError(ErrorCode.UNAUTHORIZED, noBearer(request, '<api key>', 'API key'), {
          headers: { 'WWW-Authenticate': 'Bearer realm="herald"' },
        }),
      );
      return;
    }
    const identity = store.authenticate(token, request.raw.socket);
    if (!(identity instanceof Promise)) {
      done(accept(request, identity));
      return;
    }
    // Only a Redis lookup needs the timeout.
    withTimeout(identity).then(
      (found) => done(accept(request, found)),
      (error: unknown) => done(unavailable('API key lookup (Redis)', error)),
    );
  };
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/**
 * Why a request has no {@link bearerToken}: no `Authorization` header, or one that is not `Bearer` with
 * one credential (`Basic …`, a key pasted with a space or a newline inside).
 */
export function noBearer(request: FastifyRequest, placeholder: string, what: string): string {
  return request.headers.authorization === undefined
    ? `Missing ${what}: send "Authorization: Bearer ${placeholder}".`
    : `The Authorization header is not "Bearer ${placeholder}" (one key, no space inside it): send "Authorization: Bearer ${placeholder}".`;
}

/** The credential of `Authorization: Bearer <credential>`, or undefined without one. */
export function bearerToken(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  return (typeof header === 'string' ? BEARER.exec(header) : null)?.[1];
}
