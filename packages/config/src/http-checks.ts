import { type IncomingHttpHeaders, type IncomingMessage, STATUS_CODES } from 'node:http';

/**
 * Request headers a Herald HTTP server takes once and refuses twice, by lower-case name, as an error
 * names them. Node keeps the first of a repeated `Authorization` or `Content-Type` and joins repeated
 * `Idempotency-Key`s with ", ": a proxy in front that reads another one would act for another tenant,
 * or with another key.
 */
export const ONCE_HEADERS: ReadonlyMap<string, string> = new Map([
  ['authorization', 'Authorization'],
  ['content-type', 'Content-Type'],
  ['idempotency-key', 'Idempotency-Key'],
]);

/**
 * The first header of `names` (lower-case name → name as an error says it) that `raw` has more than
 * once, or undefined. The common request costs no string work: as many distinct names as header lines,
 * nothing is repeated.
 *
 * @example
 * ```ts
 * const repeated = repeatedHeader(request.raw, ONCE_HEADERS); // 'Authorization' | undefined
 * ```
 */
export function repeatedHeader(raw: IncomingMessage, names: ReadonlyMap<string, string>): string | undefined {
  const { rawHeaders, headers } = raw;
  let distinct = 0;
  for (const _name in headers) distinct++;
  if (distinct * 2 === rawHeaders.length) return undefined;
  const seen = new Set<string>();
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = (rawHeaders[i] as string).toLowerCase();
    if (!names.has(name)) continue;
    if (seen.has(name)) return names.get(name);
    seen.add(name);
  }
  return undefined;
}

/**
 * The request's `Transfer-Encoding` when it is another than `chunked` alone, or undefined. Node takes
 * off the chunks only: a body sent "gzip, chunked" would be read as if it were not gzipped (RFC 9112
 * §6.1: a coding the server does not know is refused, not ignored).
 */
export function unsupportedTransferCoding(headers: IncomingHttpHeaders): string | undefined {
  const coding = headers['transfer-encoding'];
  return coding !== undefined && coding.trim().toLowerCase() !== 'chunked' ? coding : undefined;
}

/**
 * A whole HTTP/1.1 answer carrying `body` (Herald's error JSON) and closing the connection, as bytes: for
 * what is answered straight on the socket, before any reply exists (a request Node's parser refused).
 */
export function closingAnswer(status: number, body: string, headers = ''): string {
  return `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n${headers}Content-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
}
