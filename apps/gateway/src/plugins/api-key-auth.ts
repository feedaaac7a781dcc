import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { ErrorCode, HttpError } from '../errors.js';

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/**
 * Checks `Authorization: Bearer <api key>` against the configured keys. Keys are compared as
 * SHA-256 digests with `timingSafeEqual`, so neither timing nor length leaks a key.
 */
export function createApiKeyAuth(apiKeys: readonly string[]): (request: FastifyRequest) => Promise<void> {
  const digests = apiKeys.map(digest);
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
    const presented = digest(match[1]);
    let found = false;
    for (const candidate of digests) {
      // No early exit: every key is compared, whichever matches.
      if (timingSafeEqual(candidate, presented)) found = true;
    }
    if (!found) {
      throw new HttpError(
        401,
        ErrorCode.UNAUTHORIZED,
        'Unknown API key: check the key or ask an operator for one.',
        {
          headers: { 'WWW-Authenticate': 'Bearer realm="herald", error="invalid_token"' },
        },
      );
    }
  };
}
