import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import {
  ErrorResponse,
  NEW_TENANT_ID_PATTERN,
  Webhook,
  WebhookRequest,
  WebhookWithSecret,
} from '@herald/protocol';
import { checkWebhookUrl } from '@herald/webhooks';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import Type, { type TSchema } from 'typebox';
import { changeUnavailable, ErrorCode, HttpError, unavailable } from '../../errors.js';
import { INBOX_POLICY } from '../../limits.js';

const ERRORS = { 401: ErrorResponse, 404: ErrorResponse, 429: ErrorResponse, 503: ErrorResponse };
const Resumed = Type.Object({
  webhook: Webhook,
  resent: Type.Integer({ minimum: 0, description: 'Held messages queued again.' }),
});

/** Where the routes of one audience live and who they act for. */
interface Audience {
  /** `/webhook` (the caller's tenant) or `/admin/tenants/:tenantId/webhook`. */
  path: string;
  tags: string[];
  /** Route options: who may call (`onRequest`), limits, the params schema. */
  options: { onRequest: FastifyInstance['authenticate']; params?: TSchema; config?: object };
  tenantOf(request: FastifyRequest): string;
  whose: string;
}

/**
 * Delivery webhooks, set by a tenant for itself (its API key: `/webhook`) or by the operator for any
 * tenant (`HERALD_ADMIN_KEY`: `/admin/tenants/:tenantId/webhook`, `/admin/webhooks`). An API key only
 * ever reaches its own tenant's webhook: the tenant comes from the key, never from the request.
 */
const webhookRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { store, events } = app.webhooks;
  /** `call()`; a Redis failure is a 503 (of a `change`: saying it may have been made when it was sent). */
  const fromRedis = async <T>(call: () => Promise<T>, change = false): Promise<T> => {
    try {
      return await app.withRedisTimeout(call());
    } catch (error) {
      if (error instanceof HttpError) throw error;
      throw change ? changeUnavailable('Redis', error) : unavailable('Redis', error);
    }
  };

  const audiences: Audience[] = [
    {
      path: '/webhook',
      tags: ['webhooks'],
      options: { onRequest: app.authenticate, config: { rateLimit: app.limits.perApiKey(INBOX_POLICY) } },
      tenantOf: (request) => request.identity.tenantId,
      whose: "this API key's tenant",
    },
    {
      path: '/admin/tenants/:tenantId/webhook',
      tags: ['admin', 'webhooks'],
      options: {
        onRequest: app.authenticateAdmin,
        params: Type.Object({ tenantId: Type.String({ pattern: NEW_TENANT_ID_PATTERN }) }),
      },
      tenantOf: (request) => (request.params as { tenantId: string }).tenantId,
      whose: 'this tenant',
    },
  ];

  for (const audience of audiences) {
    const { path, tags, options, tenantOf, whose } = audience;
    const missing = (tenantId: string) =>
      new HttpError(ErrorCode.NOT_FOUND, `No webhook for ${whose} (${tenantId}): PUT ${path} sets one.`);
    const schema = (extra: object) => ({
      tags,
      ...(options.params ? { params: options.params } : {}),
      ...extra,
    });
    const route = { onRequest: options.onRequest, ...(options.config ? { config: options.config } : {}) };
    /** A handler answering what `call` finds of the tenant's webhook; 404 when it has none. */
    const found =
      <T>(call: (tenantId: string) => Promise<T | undefined>, change = false) =>
      async (request: FastifyRequest): Promise<T> => {
        const tenantId = tenantOf(request);
        const result = await fromRedis(() => call(tenantId), change);
        if (!result) throw missing(tenantId);
        return result;
      };

    app.get(
      path,
      {
        ...route,
        schema: schema({
          summary: `The delivery webhook of ${whose} (never its secret)`,
          response: { 200: Webhook, ...ERRORS },
        }),
      },
      found((tenantId) => store.get(tenantId)),
    );

    app.put(
      path,
      {
        ...route,
        schema: schema({
          summary: `Set the delivery webhook of ${whose}`,
          description:
            'Creates it (201, with its signing `secret`, shown once) or changes its URL and events (200; the secret, state and counters stay). Events are POSTed signed as Standard Webhooks define, with the body `components.schemas.WebhookEvent`: see the README, "Delivery webhooks".',
          body: WebhookRequest,
          response: { 200: Webhook, 201: WebhookWithSecret, 400: ErrorResponse, ...ERRORS },
        }),
      },
      async (request, reply: FastifyReply) => {
        const tenantId = tenantOf(request);
        const body = request.body as WebhookRequest;
        const problem = checkWebhookUrl(body.url, { allowPrivate: app.config.webhookAllowPrivate });
        if (problem) {
          throw new HttpError(
            problem.kind === 'private' ? ErrorCode.WEBHOOK_URL_REFUSED : ErrorCode.VALIDATION,
            `body.url ${problem.message}`,
            { details: [{ field: 'body.url', message: problem.message }] },
          );
        }
        const { created, webhook } = await fromRedis(
          () => store.set(tenantId, { url: body.url, events: body.events }),
          true,
        );
        return reply.code(created ? 201 : 200).send(webhook);
      },
    );

    app.delete(
      path,
      {
        ...route,
        schema: schema({
          summary: `Delete the delivery webhook of ${whose} and its held messages`,
          response: { 204: Type.Null(), ...ERRORS },
        }),
      },
      async (request, reply: FastifyReply) => {
        const tenantId = tenantOf(request);
        if (!(await fromRedis(() => store.delete(tenantId), true))) throw missing(tenantId);
        return reply.code(204).send();
      },
    );

    app.post(
      `${path}/rotate-secret`,
      {
        ...route,
        schema: schema({
          summary: `A new signing secret for the webhook of ${whose}`,
          description:
            'The new secret is shown once. For 24 hours the previous one signs too (a second `v1,` signature), so receivers can switch without losing a message.',
          response: { 200: WebhookWithSecret, ...ERRORS },
        }),
      },
      found((tenantId) => store.rotate(tenantId), true),
    );

    app.post(
      `${path}/resume`,
      {
        ...route,
        schema: schema({
          summary: `Unpark the webhook of ${whose}: held messages are sent again`,
          response: { 200: Resumed, 409: ErrorResponse, ...ERRORS },
        }),
      },
      async (request) => {
        const tenantId = tenantOf(request);
        const result = await fromRedis(() => store.resume(tenantId, (held) => events.resend(held)), true);
        if (result.outcome === 'missing') throw missing(tenantId);
        if (result.outcome === 'not-parked') {
          throw new HttpError(
            ErrorCode.WEBHOOK_NOT_PARKED,
            `The webhook of ${whose} (${tenantId}) is not parked: nothing to resume.`,
          );
        }
        const { webhook, resent } = result;
        return { webhook, resent };
      },
    );
  }

  app.get(
    '/admin/webhooks',
    {
      onRequest: app.authenticateAdmin,
      schema: {
        summary: "Every tenant's delivery webhook, parked ones included (never a secret)",
        tags: ['admin', 'webhooks'],
        response: {
          200: Type.Object({ webhooks: Type.Array(Webhook) }),
          401: ErrorResponse,
          404: ErrorResponse,
          503: ErrorResponse,
        },
      },
    },
    async () => ({ webhooks: await fromRedis(() => store.list()) }),
  );
};

export default webhookRoutes;
