import type { Socket } from 'node:net';
import { closingAnswer } from '@herald/config';
import { ErrorCode } from '@herald/protocol';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';

/** A closing HTTP/1.1 answer written straight to a socket, Herald's JSON for body. */
const closing = (status: number, error: string, code: string = ErrorCode.BAD_REQUEST): string =>
  closingAnswer(status, JSON.stringify({ error, code }));

/**
 * What Node's HTTP parser refuses before Fastify sees a request (an unknown method, a malformed
 * request line or header), in Herald's shape rather than Fastify's `{ error, message, statusCode }`.
 */
export function clientErrorHandler(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const answer =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? closing(
          431,
          'The request line and headers are too large: send a shorter URL or fewer, shorter headers.',
          ErrorCode.HEADERS_TOO_LARGE,
        )
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? closing(
            408,
            'The request did not arrive in time (headers within 5 s, all of it within 10 s): send it again, faster.',
            ErrorCode.REQUEST_TIMEOUT,
          )
        : closing(
            400,
            `Malformed HTTP request (${error.code ?? 'parse error'}): check the method, the request line and the headers.`,
          );
  socket.end(answer);
}

/** Errors Fastify's router raises before a route runs (a path whose percent-encoding is broken). */
export function frameworkErrors(_error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  void reply.code(400).send({
    error: `Malformed path ${JSON.stringify(request.url.split('?')[0])}: check its percent-encoding.`,
    code: ErrorCode.BAD_REQUEST,
  });
}
