import { isUtf8 } from 'node:buffer';
import { BODY_MAX_DEPTH } from '@herald/protocol';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { ErrorCode, HttpError } from '../../errors.js';
import { boundedBody } from './http-layer.js';

/** What is wrong with a JSON value, naming the field (`body.payload.a.0`). */
export interface JsonProblem {
  field: string;
  message: string;
}

/**
 * A body whose array `field` holds items checked one by one (`POST /notify/batch`'s `notifications`):
 * an item with a problem of {@link jsonProblem} is rejected alone, as long as the array has 1 to
 * `maxItems` items (else the body is checked whole, as any other).
 */
export interface JsonItems {
  field: string;
  maxItems: number;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The body's items checked one by one by the JSON parser (see {@link checkBody}). */
    jsonItems?: JsonItems;
  }
}

/**
 * What stands in the body for an item set aside by {@link checkBody}: its problem, and nothing of the
 * item, so that no later step (validation, idempotency fingerprint, enqueue) ever walks or merges it.
 */
export class RefusedItem {
  constructor(readonly problem: JsonProblem) {}
}

/**
 * A number JSON cannot carry exactly. Only a payload (free-form data) is told to send it as a string:
 * Herald's own number fields (`delayMs`, `priority`) take no strings.
 */
const NUMBER_RANGE = `must be a number from -${Number.MAX_SAFE_INTEGER} to ${Number.MAX_SAFE_INTEGER}`;
const PAYLOAD_NUMBER_RANGE = `${NUMBER_RANGE} (larger ones are not carried exactly: send them as strings)`;
const IN_PAYLOAD = /\.payload(\.|$)/;

/** Matches only a lone surrogate: in `u` mode a pair is one code point, outside this class. */
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

/** A key as it appears in a field name: long keys are cut, so that an error stays readable. */
const shown = (key: string): string => (key.length > 64 ? `${key.slice(0, 64)}…` : key);

/**
 * The first problem of `value` (in document order) that would hurt a notification on its way to the
 * browser, or undefined: objects and arrays nested deeper than `maxDepth` (`value` itself is level
 * `level + 1` when it is one: `level` is how deep it sits in the body it was read from), a number
 * beyond ±(2^53 - 1) (not carried exactly; `1e400` parses to Infinity), a string or key that is not
 * well-formed Unicode (a lone surrogate cannot be sent as UTF-8), and the
 * prototype keys `__proto__` and `constructor.prototype`. Iterative: any depth costs no stack. It runs
 * on every request body, so it allocates no object or string per value: the stack is three parallel
 * arrays, and a value's field name (`body.payload.a.0`) is spelled out only for the one with a problem,
 * from the path of keys kept beside the stack.
 */
export function jsonProblem(
  value: unknown,
  root: string,
  maxDepth: number,
  level = 0,
): JsonProblem | undefined {
  const values: unknown[] = [value];
  const depths: number[] = [level];
  /** Per stack entry, its node in the path tree (-1: the root). */
  const nodes: number[] = [-1];
  /** The path tree: node i is key `keys[i]` of node `parents[i]`. */
  const parents: number[] = [];
  const keys: (string | number)[] = [];
  const fieldOf = (node: number): string => {
    const path: (string | number)[] = [];
    for (let at = node; at >= 0; at = parents[at] as number) path.push(keys[at] as string | number);
    let field = root;
    for (let i = path.length - 1; i >= 0; i--) {
      const key = path[i] as string | number;
      field += `.${typeof key === 'string' ? shown(key) : key}`;
    }
    return field;
  };
  const push = (child: unknown, node: number, key: string | number, depth: number): number => {
    parents.push(node);
    keys.push(key);
    values.push(child);
    depths.push(depth);
    nodes.push(parents.length - 1);
    return parents.length - 1;
  };
  while (values.length > 0) {
    const v = values.pop();
    const depth = depths.pop() as number;
    const node = nodes.pop() as number;
    if (typeof v === 'number') {
      // Beyond ±(2^53 - 1) JSON.parse has already rounded (2^53 + 1 reads as 2^53), and msgpack
      // corrupts whole numbers outside int64/uint64 (1e21 arrives as 3875820019684212700, 1e300 as 0);
      // 1e400 parses to Infinity, which JSON carries as null.
      if (!(Math.abs(v) <= Number.MAX_SAFE_INTEGER)) {
        const field = fieldOf(node);
        return { field, message: IN_PAYLOAD.test(field) ? PAYLOAD_NUMBER_RANGE : NUMBER_RANGE };
      }
      continue;
    }
    if (typeof v === 'string') {
      if (LONE_SURROGATE.test(v))
        return { field: fieldOf(node), message: 'must be well-formed Unicode (it has a lone surrogate)' };
      continue;
    }
    if (typeof v !== 'object' || v === null) continue;
    if (depth >= maxDepth)
      return { field: fieldOf(node), message: `nests deeper than ${maxDepth} levels of objects and arrays` };
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) push(v[i], node, i, depth + 1);
      continue;
    }
    const record = v as Record<string, unknown>;
    const names = Object.keys(record);
    for (let i = names.length - 1; i >= 0; i--) {
      const key = names[i] as string;
      const child = record[key];
      const at = push(child, node, key, depth + 1);
      if (LONE_SURROGATE.test(key))
        return { field: fieldOf(at), message: 'is a key that is not well-formed Unicode' };
      if (key === '__proto__') return { field: fieldOf(at), message: 'is not an accepted key' };
      if (key === 'constructor' && typeof child === 'object' && child !== null && 'prototype' in child) {
        return { field: `${fieldOf(at)}.prototype`, message: 'is not an accepted key' };
      }
    }
  }
  return undefined;
}

/**
 * {@link jsonProblem} of a request body (`body`, at most {@link BODY_MAX_DEPTH} levels deep), with
 * `items` checked one by one when the body has them: the problem of the body outside its items, or
 * undefined; each item with a problem is replaced in its array by a {@link RefusedItem} naming it.
 */
export function checkBody(value: unknown, items: JsonItems | undefined): JsonProblem | undefined {
  const record = value as Record<string, unknown>;
  const list =
    items !== undefined &&
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    Object.hasOwn(record, items.field)
      ? record[items.field]
      : undefined;
  if (items === undefined || !Array.isArray(list) || list.length === 0 || list.length > items.maxItems) {
    return jsonProblem(value, 'body', BODY_MAX_DEPTH);
  }
  // The body without its items (rest properties define each key as its own: a `__proto__` one stays a
  // plain key, checked as such).
  const { [items.field]: _items, ...rest } = record;
  const problem = jsonProblem(rest, 'body', BODY_MAX_DEPTH);
  if (problem) return problem;
  for (let index = 0; index < list.length; index++) {
    // Each item sits 2 levels down: body (0) > array (1) > item (2).
    const itemProblem = jsonProblem(list[index], `body.${items.field}.${index}`, BODY_MAX_DEPTH, 2);
    if (itemProblem) list[index] = new RefusedItem(itemProblem);
  }
  return undefined;
}

/** A 400 naming `problem`'s field. */
export function invalid(problem: JsonProblem): HttpError {
  return new HttpError(ErrorCode.VALIDATION, `Invalid request: ${problem.field} ${problem.message}`, {
    details: [problem],
  });
}

const CHARSET = /;\s*charset\s*=\s*"?([^";\s]*)"?/i;

/** What is wrong with an empty body on a route that needs one (the parser's and the error handler's). */
export const EMPTY_BODY: JsonProblem = { field: 'body', message: 'is empty: send a JSON object' };

/**
 * Whether `request`'s route reads no body (no body schema; the not-found handler neither): an empty body
 * sent to it with a Content-Type is no body, as many HTTP clients send `Content-Type: application/json`
 * on every request, DELETE included.
 */
const takesNoBody = (request: FastifyRequest): boolean => request.routeOptions.schema?.body === undefined;

/**
 * A JSON body sent to a route that takes none, naming its first field: ignored, it could be read as the
 * request's by the caller (`PUT /topics/t/subscribers/dave` with `{ "userIds": ["eve"] }` subscribed
 * dave). `{}` and `null` pass: some clients send them with every request.
 */
function unwantedBody(request: FastifyRequest, value: unknown): JsonProblem | undefined {
  if (value === null) return undefined;
  const fields = typeof value === 'object' && !Array.isArray(value) ? Object.keys(value) : undefined;
  if (fields?.length === 0) return undefined;
  return {
    field: fields === undefined ? 'body' : `body.${fields[0]}`,
    message: `is not allowed: ${request.method} ${request.routeOptions.url} takes no body`,
  };
}

/**
 * Replaces Fastify's JSON parser with one that says exactly what is wrong, as a 400 naming the field:
 * the body must be UTF-8 (a `charset` parameter other than `utf-8` is a 415; a leading BOM is
 * ignored, as RFC 8259 allows), valid JSON, at most {@link BODY_MAX_DEPTH} levels deep, with finite
 * numbers, well-formed strings and no prototype keys (see {@link jsonProblem}); on a route with
 * `config.jsonItems`, an item with such a problem is set aside alone (see {@link checkBody}). A
 * `Content-Encoding` other than `identity` is a 415: the gateway does not decompress bodies. An empty
 * body (or only whitespace) is a 400 on a route that needs a body, and no body at all on one that takes
 * none, whatever its Content-Type.
 */
export default fp(
  async (app: FastifyInstance) => {
    // Fastify closes the connection after any body parser's error; a bounded body (read, or drained by
    // Node after the answer) needs no new connection, as after a 401.
    const refused = new WeakSet<FastifyRequest>();
    const bodyLimit = app.initialConfig.bodyLimit ?? 1024 * 1024;
    app.addHook('onSend', (request, reply, payload, done) => {
      if (refused.has(request) && boundedBody(request, bodyLimit)) reply.removeHeader('Connection');
      done(null, payload);
    });
    const refuse = (request: FastifyRequest, error: HttpError): HttpError => {
      refused.add(request);
      return error;
    };

    app.removeContentTypeParser('application/json');
    app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body: Buffer, done) => {
      const charset = CHARSET.exec(request.headers['content-type'] ?? '')?.[1]?.toLowerCase();
      if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
        done(
          refuse(
            request,
            new HttpError(
              ErrorCode.UNSUPPORTED_MEDIA_TYPE,
              `Unsupported charset "${charset}": send JSON in UTF-8 (charset=utf-8, or no charset).`,
            ),
          ),
        );
        return;
      }
      // isUtf8 (native, vectorised) then toString: several times cheaper than a fatal TextDecoder.
      if (!isUtf8(body)) {
        done(refuse(request, invalid({ field: 'body', message: 'is not valid UTF-8' })));
        return;
      }
      // A leading BOM is ignored, as RFC 8259 allows (toString keeps it; JSON.parse would refuse it).
      const text =
        body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf
          ? body.toString('utf8', 3)
          : body.toString('utf8');
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch (error) {
        if (text.trim() !== '') {
          done(
            refuse(
              request,
              invalid({ field: 'body', message: `is not valid JSON (${(error as Error).message})` }),
            ),
          );
        } else if (takesNoBody(request)) done(null, undefined);
        else done(refuse(request, invalid(EMPTY_BODY)));
        return;
      }
      const problem = takesNoBody(request)
        ? unwantedBody(request, value)
        : checkBody(value, request.routeOptions.config?.jsonItems);
      done(problem ? refuse(request, invalid(problem)) : null, value);
    });

    // Fastify also parses text/plain, and would hand its string to a route that wants an object: every
    // body that is not JSON is a 415 instead.
    app.removeContentTypeParser('text/plain');
    app.addContentTypeParser('*', (request, _payload, done) => {
      const {
        'content-type': type,
        'content-length': length,
        'transfer-encoding': chunked,
      } = request.headers;
      // An empty body declared as such (`fetch` sends `text/plain` with an empty string body).
      if ((length === '0' || (length === undefined && chunked === undefined)) && takesNoBody(request)) {
        done(null, undefined);
        return;
      }
      done(
        refuse(
          request,
          new HttpError(
            ErrorCode.UNSUPPORTED_MEDIA_TYPE,
            `${type ? `Content-Type "${type}" is not supported` : 'A body needs a Content-Type'}: send JSON with "Content-Type: application/json".`,
          ),
        ),
      );
    });

    app.addHook('onRequest', (request: FastifyRequest, _reply, done) => {
      const { 'content-encoding': encoding, 'content-length': length } = request.headers;
      // Only a body to read can be encoded: a GET or HEAD (whose body Fastify never reads) or a request
      // without a body is served whatever its Content-Encoding (some clients send one on every request).
      if (
        encoding === undefined ||
        encoding.trim().toLowerCase() === 'identity' ||
        request.method === 'GET' ||
        request.method === 'HEAD' ||
        ((length === undefined || length === '0') && request.headers['transfer-encoding'] === undefined)
      ) {
        done();
        return;
      }
      done(
        new HttpError(
          ErrorCode.UNSUPPORTED_MEDIA_TYPE,
          `Unsupported Content-Encoding "${encoding}": send the body uncompressed.`,
          { headers: { 'Accept-Encoding': 'identity' } },
        ),
      );
    });
  },
  { name: 'json-body', fastify: '5.x' },
);
