import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ErrorResponse, NotificationStatus, UserId } from '@herald/protocol';
import Type from 'typebox';
import { ErrorCode, HttpError, unavailable } from '../../errors.js';
import type { TenantStatus } from '../../status.js';

/** `GET /notifications/:id`: where a notification is, for the tenant that sent it. */
const statusRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/notifications/:id',
    {
      onRequest: app.authenticate,
      schema: {
        summary: 'Status of a notification',
        description:
          '`queued` until one of the user’s clients acknowledges it (`delivered`); `failed` after its last attempt; `expired` when its ttlMs passed first. A topic send or broadcast: `queued` while it fans out, `sent` once every recipient’s inbox has it, with `recipients` counting them; `?userId=` gives one recipient’s status. Visible only to the tenant that sent it.',
        params: Type.Object({ id: Type.String({ minLength: 1, maxLength: 128 }) }),
        // `userId`: with a topic send or broadcast, the status of that one recipient.
        querystring: Type.Object({ userId: Type.Optional(UserId) }),
        response: {
          200: NotificationStatus,
          400: ErrorResponse,
          401: ErrorResponse,
          404: ErrorResponse,
          503: ErrorResponse,
        },
      },
    },
    async (request) => {
      const identity = request.identity;
      const { id } = request.params;
      const { userId } = request.query;
      let status: TenantStatus | undefined;
      try {
        status = await app.withRedisTimeout(
          (async () => {
            const single = await app.statusOf(identity.tenantId, id);
            if (single) return userId === undefined || single.userId === userId ? single : undefined;
            return app.fanoutStatusOf(identity.tenantId, id, userId);
          })(),
        );
      } catch (error) {
        throw unavailable('Redis', error);
      }
      // Another tenant's notification answers exactly like a missing one.
      if (!status || status.tenantId !== identity.tenantId) {
        throw new HttpError(
          ErrorCode.NOT_FOUND,
          userId === undefined
            ? `No notification ${id} for this API key's tenant`
            : `No notification ${id} to ${userId} for this API key's tenant`,
        );
      }
      const { tenantId: _tenant, ...visible } = status;
      return visible;
    },
  );
};

export default statusRoutes;
