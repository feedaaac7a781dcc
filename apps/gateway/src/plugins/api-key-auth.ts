import type { FastifyRequest } from 'fastify';
import type { ApiKeyIdentity, ApiKeyStore } from '../api-keys.js';
import { ErrorCode, HttpError, unavailable } from '../errors.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The caller, set by `authenticate`. */
    apiKey?: ApiKeyIdentity;
  }
}

/**
 * An `onRequest` hook that accepts `Authorization: Bearer <api key>` when the key is known and not
 * revoked, and sets `request.apiKey`; anything else is a 401 JSON error.
 */
export function createApiKeyAuth(
  store: ApiKeyStore,
  withTimeout: <T>(promise: Promise<T>) => Promise<T>,
): (request: FastifyRequest) => Promise<void> {
  return async (request) => {
    const header = request.headers.authorization;
    const match = typeof header === 'string' ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
    if (!match?.[1]) {
      throw new HttpError(
        401,
        ErrorCode.UNAUTHORIZED,
        'Missing API key: send "Authorization: Bearer <api key>".',
        {
          headers: { 'WWW-Authenticate': 'Bearer realm="herald"' },
        },
      );
    }
    let identity = store.authenticate(match[1]);
    if (identity instanceof Promise) {
      // Only a Redis lookup needs the timeout; environment keys and cached ones answer at once.
      try {
        identity = await withTimeout(identity);
      } catch (error) {
        throw unavailable('API key lookup (Redis)', error);
      }
    }
    if (!identity) {
      throw new HttpError(
        401,
        ErrorCode.UNAUTHORIZED,
        'Unknown or revoked API key: check the key or ask an operator for one.',
        { headers: { 'WWW-Authenticate': 'Bearer realm="herald", error="invalid_token"' } },
      );
    }
    request.apiKey = identity;
  };
}
