import { ErrorCode, errorSpec, TOKEN_TOPICS_MAX, TopicName, UserId } from '@herald/protocol';
import type { FastifyInstance } from 'fastify';
import Type, { type Static } from 'typebox';

const Body = Type.Union([
  Type.Object(
    {
      userId: Type.Optional(UserId),
      topics: Type.Optional(Type.Array(TopicName, { maxItems: TOKEN_TOPICS_MAX })),
    },
    { additionalProperties: false },
  ),
  Type.Null(),
]);

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
  app.post<{ Body: Static<typeof Body> }>(
    '/dev/token',
    {
      schema: { body: Body },
      // Fastify reads text/plain as a string, which the schema then refuses with a riddle.
      preValidation: async (request, reply) => {
        if (typeof request.body !== 'string') return;
        return reply.status(415).send({
          error: errorSpec(ErrorCode.UNSUPPORTED_MEDIA_TYPE).message,
          code: ErrorCode.UNSUPPORTED_MEDIA_TYPE,
        });
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
