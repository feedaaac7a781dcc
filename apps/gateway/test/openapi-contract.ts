import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { HERALD_HEADERS } from '../src/plugins/external/openapi.js';

type Response = {
  $ref?: string;
  headers?: Record<string, unknown>;
  content?: Record<string, { schema?: object }>;
};
type Document = {
  paths: Record<string, Record<string, { responses?: Record<string, Response> }>>;
  components?: { responses?: Record<string, Response> };
};

/** Answers sent before or without a route (router, body parser, not-found handler). */
const UNROUTED: Record<number, string> = {
  400: 'BadRequest',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  414: 'UriTooLong',
  417: 'ExpectationFailed',
};

/**
 * Answers the HTTP layer gives on any path before the route runs, though the route is known (no `Host`,
 * an unmet `Expect`): documented once in `components.responses`, recognised by their code.
 */
const ANY_PATH: Record<number, { name: string; code: string }> = {
  400: { name: 'BadRequest', code: 'HERALD_ERR_BAD_REQUEST' },
  417: { name: 'ExpectationFailed', code: 'HERALD_ERR_EXPECTATION_FAILED' },
};

const problemsOf = new WeakMap<FastifyInstance, string[]>();

/**
 * Checks every answer `app` sends against its own `/openapi.json`: the status is documented for the
 * operation, every Herald header sent is documented for that status, and a JSON body validates
 * against the documented schema (ajv). Problems are collected; {@link contractProblems} returns them.
 */
export function checkAgainstOpenApi(app: FastifyInstance): void {
  const problems: string[] = [];
  problemsOf.set(app, problems);
  const ajv = new Ajv({ strict: false, allErrors: false });
  addFormats.default(ajv);
  const validators = new Map<object, ValidateFunction>();
  let document: Document | undefined;

  const resolve = (response: Response | undefined): Response | undefined => {
    const name = response?.$ref?.split('/').at(-1);
    return name === undefined ? response : document?.components?.responses?.[name];
  };
  const check = (request: FastifyRequest, reply: FastifyReply, payload: unknown): void => {
    document ??= app.swagger() as unknown as Document;
    const method = request.method.toLowerCase();
    const url = request.routeOptions.url;
    if (method === 'head' || url === '/openapi.json' || url?.startsWith('/docs')) return;
    const status = reply.statusCode;
    const where = `${request.method} ${url ?? request.url} → ${status}`;
    let response: Response | undefined;
    if (url === undefined) {
      const name = UNROUTED[status];
      response = name === undefined ? undefined : document.components?.responses?.[name];
      if (response === undefined && ![413, 415].includes(status))
        problems.push(`${where}: undocumented unrouted answer`);
    } else {
      const operation = document.paths[url.replace(/:(\w+)/g, '{$1}')]?.[method];
      if (operation === undefined) {
        problems.push(`${where}: route missing from /openapi.json`);
        return;
      }
      const responses = operation.responses ?? {};
      response = resolve(
        responses[String(status)] ?? responses[`${String(status)[0]}XX`] ?? responses.default,
      );
      const anyPath = ANY_PATH[status];
      if (response === undefined && anyPath !== undefined && typeof payload === 'string') {
        const code = (JSON.parse(payload) as { code?: unknown }).code;
        if (code === anyPath.code) response = document.components?.responses?.[anyPath.name];
      }
      if (response === undefined) {
        problems.push(`${where}: status not documented`);
        return;
      }
    }
    if (response === undefined) return;
    const documented = new Set(Object.keys(response.headers ?? {}).map((name) => name.toLowerCase()));
    for (const name of Object.keys(HERALD_HEADERS)) {
      if (reply.hasHeader(name) && !documented.has(name.toLowerCase())) {
        problems.push(`${where}: header ${name} not documented`);
      }
    }
    const type = String(reply.getHeader('content-type') ?? '');
    const schema = response.content?.['application/json']?.schema;
    if (!type.startsWith('application/json') || typeof payload !== 'string') return;
    if (schema === undefined) {
      problems.push(`${where}: JSON body not documented`);
      return;
    }
    let validate = validators.get(schema);
    if (!validate) {
      validate = ajv.compile(schema);
      validators.set(schema, validate);
    }
    if (!validate(JSON.parse(payload))) {
      problems.push(
        `${where}: body ${payload.slice(0, 200)} does not match: ${ajv.errorsText(validate.errors)}`,
      );
    }
  };

  app.addHook('onSend', (request, reply, payload, done) => {
    try {
      check(request, reply, payload);
    } catch (error) {
      problems.push(`${request.method} ${request.url}: contract check failed: ${String(error)}`);
    }
    done(null, payload);
  });
}

/** What {@link checkAgainstOpenApi} found wrong so far (distinct, at most 20). */
export function contractProblems(app: FastifyInstance): string[] {
  return [...new Set(problemsOf.get(app) ?? [])].slice(0, 20);
}
