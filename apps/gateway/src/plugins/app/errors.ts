import { isOutOfMemory } from '@herald/config';
import { ERRORS, PAYLOAD_MAX_BYTES } from '@herald/protocol';
import { CostExceedsCapacityError, RateLimiterUnavailableError } from '@herald/rate-limiter';
import { RateLimitedError } from '@herald/rate-limiter/fastify';
import type { FastifyError, FastifyReply } from 'fastify';
import fp from 'fastify-plugin';
import { ErrorCode, HttpError, OUT_OF_MEMORY_MESSAGE } from '../../errors.js';
import { EMPTY_BODY } from './json-body.js';
import { issueDetails } from './validation.js';

/** Codes Fastify raises for bad input, mapped to ours. */
const FASTIFY_CODES: Record<string, ErrorCode> = {
  FST_ERR_CTP_BODY_TOO_LARGE: ErrorCode.BODY_TOO_LARGE,
  FST_ERR_CTP_INVALID_MEDIA_TYPE: ErrorCode.UNSUPPORTED_MEDIA_TYPE,
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: ErrorCode.BAD_REQUEST,
  FST_ERR_CTP_EMPTY_JSON_BODY: ErrorCode.VALIDATION,
  FST_ERR_CTP_INVALID_JSON_BODY: ErrorCode.VALIDATION,
};

/**
 * The answer to a denied call: 429 (503 when the limiter's Redis was away and the failure mode denied)
 * with `Retry-After`. The limiter plugin calls it directly (`onDenied`), and the error handler for a
 * `RateLimitedError` thrown anywhere else: one shape either way.
 */
export function sendRateLimited(reply: FastifyReply, error: RateLimitedError): void {
  reply.code(error.statusCode).header('Retry-After', String(error.retryAfterSeconds));
  const { policy, retryAfterMs } = error.result;
  if (error.statusCode === 503) {
    void reply.send({
      // A full Redis is no slow limiter: the operator's fix differs (memory, not HERALD_RATE_LIMIT_TIMEOUT_MS).
      error: isOutOfMemory(error.result.fallback?.cause)
        ? OUT_OF_MEMORY_MESSAGE
        : 'Rate limiter unavailable; nothing was accepted. Retry later.',
      code: ErrorCode.UNAVAILABLE,
      retryAfterMs,
    });
  } else {
    void reply.send({
      error: ERRORS.RATE_LIMITED.message,
      code: ErrorCode.RATE_LIMITED,
      policy,
      retryAfterMs,
    });
  }
}

/** The rate limiter's refusals (`@herald/rate-limiter/fastify` throws them and writes no body). */
function limiterAnswer(error: unknown, reply: FastifyReply): boolean {
  if (error instanceof RateLimitedError) {
    sendRateLimited(reply, error);
    return true;
  }
  if (error instanceof CostExceedsCapacityError) {
    // A batch asking one bucket for more than its burst: it can never pass as it is (no Retry-After).
    void reply.code(400).send({
      error: error.message,
      code: ErrorCode.BATCH_EXCEEDS_BURST,
      policy: error.policy,
      cost: error.cost,
      capacity: error.capacity,
    });
    return true;
  }
  if (error instanceof RateLimiterUnavailableError) {
    void reply.code(503).header('Retry-After', '1').send({
      error: 'Rate limiter unavailable; nothing was accepted. Retry later.',
      code: ErrorCode.UNAVAILABLE,
    });
    return true;
  }
  return false;
}

/**
 * The one owner of the HTTP error JSON: every error is `{ error, code, details? }` (codes and
 * statuses from `@herald/protocol`'s catalogue); 4xx say what is wrong; 5xx hide their details (they
 * are logged with the request id instead).
 */
export default fp(
  async (app) => {
    const bodyLimitKb = (app.initialConfig.bodyLimit ?? 1024 * 1024) / 1024;
    /** Fastify's messages of its own body errors, with what to do ("Request body is too large" says no limit). */
    const messages: Record<string, string> = {
      FST_ERR_CTP_BODY_TOO_LARGE: `The request body is over ${bodyLimitKb} KB: send a smaller one (a notification's payload may be ${PAYLOAD_MAX_BYTES / 1024} KB; a batch of many, split it).`,
    };
    app.setErrorHandler((error: FastifyError | HttpError, request, reply) => {
      if (error instanceof HttpError) {
        void reply
          .code(error.statusCode)
          .headers(error.headers)
          .send({
            error: error.message,
            code: error.code,
            ...(error.details === undefined ? {} : { details: error.details }),
            ...error.extra,
          });
        return;
      }
      if (limiterAnswer(error, reply)) return;
      if (error.validation) {
        // A route that needs a body, sent none (no Content-Type: the JSON parser never ran): say so.
        const details =
          error.validationContext === 'body' && request.body === undefined
            ? [EMPTY_BODY]
            : issueDetails(error.validationContext ?? 'body', error.validation);
        const first = details[0];
        void reply.code(400).send({
          error: first ? `Invalid request: ${first.field} ${first.message}` : 'Invalid request',
          code: ErrorCode.VALIDATION,
          details,
        });
        return;
      }
      const status = error.statusCode ?? 500;
      if (status === 403) {
        // Only the docs' file route refuses on its own (a path that leaves its folder: `..`): there is
        // no file there to serve, as for any other path that has none.
        void reply
          .code(404)
          .send({ error: `No such file: ${request.url.split('?')[0]}`, code: ErrorCode.NOT_FOUND });
        return;
      }
      if (status >= 400 && status < 500) {
        // Body parser errors: wrong JSON, too large, wrong content type. Say so plainly. A Content-Type
        // Fastify cannot read as one media type ("application/json, text/plain") is named, as Herald's
        // own parser names one it does not take.
        const message =
          error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE'
            ? `Content-Type ${JSON.stringify(request.headers['content-type'] ?? '')} is not supported: send JSON with "Content-Type: application/json".`
            : (messages[error.code] ?? error.message);
        void reply
          .code(status)
          .send({ error: message, code: FASTIFY_CODES[error.code] ?? ErrorCode.BAD_REQUEST });
        return;
      }
      request.log.error({ err: error }, 'request failed');
      void reply.code(500).send({
        error: 'Internal error; the gateway log has the details.',
        code: ErrorCode.INTERNAL,
      });
    });
  },
  { name: 'errors', fastify: '5.x' },
);
