import { ErrorCode, errorSpec, TOKEN_TOPICS_MAX, TopicName, UserId } from '@herald/protocol';
import type { FastifyInstance, FastifyReply } from 'fastify';
import Type, { type Static } from 'typebox';
import { Value } from 'typebox/value';

const Body = Type.Object(
  {
    userId: Type.Optional(UserId),
    topics: Type.Optional(Type.Array(TopicName, { maxItems: TOKEN_TOPICS_MAX })),
  },
  { additionalProperties: false },
);

const FIELDS = Object.keys(Body.properties).join(', ');
const CHARSET = /;\s*charset\s*=\s*"?([^";\s]*)"?/i;

/** What is wrong with the body, each problem naming its field (checked as is: nothing coerced). */
function problemsOf(body: unknown): { field: string; message: string }[] {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    return [{ field: 'body', message: 'must be an object' }];
  const problems: { field: string; message: string }[] = [];
  for (const error of Value.Errors(Body, body)) {
    if (error.keyword === 'boolean') continue; // the same unknown field again, as `schema is false`
    if (error.keyword === 'additionalProperties') {
      for (const name of (error.params as { additionalProperties?: string[] }).additionalProperties ?? [])
        problems.push({ field: `body.${name}`, message: `is not an accepted field (${FIELDS})` });
      continue;
    }
    problems.push({ field: `body${error.instancePath.replaceAll('/', '.')}`, message: error.message });
  }
  return problems;
}

function refuse(reply: FastifyReply, problems: { field: string; message: string }[]) {
  const [first] = problems;
  return reply.status(400).send({
    error: `Invalid request: ${first?.field} ${first?.message}`,
    code: ErrorCode.VALIDATION,
    details: problems,
  });
}

/**
 * `POST /dev/token` `{ userId?, topics? }` → `200 { token, expiresAt, userId }`: a user token for the
 * demo user (or the one named), letting them subscribe to `topics` themselves, minted through the
 * gateway's `POST /tokens` with the demo API key. Registered in
 * development mode only (`HERALD_DEV_MODE=true`): it hands a token for any user to anyone who asks,
 * which is what a demo needs and what production must never do (there your backend mints tokens for
 * the user it has signed in).
 */
export async function devTokenRoute(
  app: FastifyInstance,
  options: { gatewayUrl: string; apiKey: string; userId: string },
): Promise<void> {
  // JSON as the gateway reads it (this route's scope only): UTF-8, an empty body is no body, a body that
  // is not JSON a 400 naming it (Fastify's parser answered its own riddles).
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const charset = CHARSET.exec(request.headers['content-type'] ?? '')?.[1]?.toLowerCase();
    if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
      done(
        Object.assign(new Error(`Unsupported charset "${charset}": send JSON in UTF-8.`), {
          statusCode: 415,
        }),
      );
      return;
    }
    const text = String(body);
    if (text.trim() === '') {
      done(null, undefined);
      return;
    }
    try {
      done(null, JSON.parse(text));
    } catch (error) {
      done(null, new NotJson((error as Error).message));
    }
  });
  app.post<{ Body: Static<typeof Body> | null | undefined }>(
    '/dev/token',
    {
      // Fastify reads text/plain as a string, which would then be refused with a riddle.
      preValidation: async (request, reply) => {
        const body: unknown = request.body;
        if (typeof body === 'string') {
          return reply.status(415).send({
            error: errorSpec(ErrorCode.UNSUPPORTED_MEDIA_TYPE).message,
            code: ErrorCode.UNSUPPORTED_MEDIA_TYPE,
          });
        }
        if (body instanceof NotJson)
          return refuse(reply, [{ field: 'body', message: `is not valid JSON (${body.reason})` }]);
        if (body === undefined || body === null) return;
        const problems = problemsOf(body);
        if (problems.length > 0) return refuse(reply, problems);
      },
    },
    async (request, reply) => {
      const userId = request.body?.userId ?? options.userId;
      const topics = request.body?.topics;
      let response: Response;
      try {
        response = await fetch(`${options.gatewayUrl}/tokens`, {
          method: 'POST',
          headers: { authorization: `Bearer ${options.apiKey}`, 'content-type': 'application/json' },
          body: JSON.stringify({ userId, ...(topics ? { topics } : {}) }),
          signal: AbortSignal.timeout(5000),
        });
      } catch (error) {
        return reply
          .status(503)
          .header('retry-after', '1')
          .send({
            error: `The gateway at ${options.gatewayUrl} does not answer (${(error as Error).message}); start it, or set HERALD_GATEWAY_URL.`,
            code: ErrorCode.UNAVAILABLE,
          });
      }
      let body: Record<string, unknown>;
      try {
        body = (await response.json()) as Record<string, unknown>;
      } catch {
        // A balancer before the gateway (502, 504) or something else at that address.
        return reply
          .status(503)
          .header('retry-after', '1')
          .send({
            error: `The gateway at ${options.gatewayUrl} answered ${response.status} without JSON; is HERALD_GATEWAY_URL the gateway? Retry shortly.`,
            code: ErrorCode.UNAVAILABLE,
          });
      }
      if (!response.ok) return reply.status(response.status).send(body);
      return { ...body, userId };
    },
  );
}

/** A body that is not JSON, as the parser found it: refused in `preValidation`, naming the field. */
class NotJson {
  constructor(readonly reason: string) {}
}
