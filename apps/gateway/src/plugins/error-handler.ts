import type { FastifyError, FastifyInstance } from 'fastify';
import { ErrorCode, HttpError } from '../errors.js';

/** Codes Fastify raises for bad input, mapped to ours. */
const FASTIFY_CODES: Record<string, ErrorCode> = {
  FST_ERR_CTP_BODY_TOO_LARGE: ErrorCode.BODY_TOO_LARGE,
  FST_ERR_CTP_INVALID_MEDIA_TYPE: ErrorCode.UNSUPPORTED_MEDIA_TYPE,
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: ErrorCode.BAD_REQUEST,
  FST_ERR_CTP_EMPTY_JSON_BODY: ErrorCode.VALIDATION,
  FST_ERR_CTP_INVALID_JSON_BODY: ErrorCode.VALIDATION,
};

/**
 * One error handler for the whole API: every error is JSON `{ error, code, details? }`; 4xx say what
 * is wrong; 5xx hide their details (they are logged with the request id instead).
 */
export function registerErrorHandler(app: FastifyInstance): void {
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
    if (error.validation) {
      const details = error.validation.map((issue) => ({
        field: fieldOf(error.validationContext, issue.instancePath, issue.params),
        message: messageOf(issue.keyword, issue.message),
      }));
      const first = details[0];
      void reply.code(400).send({
        error: first ? `Invalid request: ${first.field} ${first.message}` : 'Invalid request',
        code: ErrorCode.VALIDATION,
        details,
      });
      return;
    }
    const status = error.statusCode ?? 500;
    if (status >= 400 && status < 500) {
      // Body parser errors: wrong JSON, too large, wrong content type. Say so plainly.
      void reply.code(status).send({
        error: error.message,
        code: FASTIFY_CODES[error.code] ?? ErrorCode.BAD_REQUEST,
      });
      return;
    }
    request.log.error({ err: error }, 'request failed');
    void reply
      .code(500)
      .send({ error: 'Internal error; the gateway log has the details.', code: ErrorCode.INTERNAL });
  });
}

/** `body.userId` from ajv's instancePath and params (required/additional properties name the field in params). */
export function fieldOf(
  context: string | undefined,
  instancePath: string,
  params: Record<string, unknown>,
): string {
  const root = context ?? 'body';
  const path = instancePath
    .split('/')
    .filter(Boolean)
    .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'));
  const missing = params.missingProperty ?? params.additionalProperty;
  if (typeof missing === 'string') path.push(missing);
  return [root, ...path].join('.');
}

export function messageOf(keyword: string, message: string | undefined): string {
  if (keyword === 'required') return 'is required';
  if (keyword === 'additionalProperties') return 'is not an accepted field';
  return message ?? 'is invalid';
}
