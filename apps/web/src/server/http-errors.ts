import type { Socket } from 'node:net';
import { ErrorCode } from '@herald/protocol';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';

/** A closing HTTP/1.1 answer written straight to a socket, Herald's JSON for body. */
function closingAnswer(
  status: number,
  reason: string,
  error: string,
  code: string = ErrorCode.BAD_REQUEST,
): string {
  const body = JSON.stringify({ error, code });
  return `HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`;
}

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
      ? closingAnswer(
          431,
          'Request Header Fields Too Large',
          'The request line and headers are too large: send a shorter URL or fewer, shorter headers.',
          ErrorCode.HEADERS_TOO_LARGE,
        )
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? closingAnswer(
            408,
            'Request Timeout',
            'The request did not arrive in time (headers within 5 s, all of it within 10 s): send it again, faster.',
            ErrorCode.REQUEST_TIMEOUT,
          )
        : closingAnswer(
            400,
            'Bad Request',
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
