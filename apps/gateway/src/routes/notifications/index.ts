import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ErrorResponse, NotificationStatus, notificationIdOf, UserId } from '@herald/protocol';
import Type from 'typebox';
import { changeUnavailable, ErrorCode, HttpError, unavailable } from '../../errors.js';
import type { TenantStatus } from '../../status.js';

/**
 * `GET /notifications/:id`: where a notification is; `DELETE`: cancel it before it is sent. Only for the
 * tenant that sent it.
 */
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
        querystring: Type.Object({ userId: Type.Optional(UserId) }, { additionalProperties: false }),
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
      const id = notificationIdOf(request.params.id);
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

  app.delete(
    '/notifications/:id',
    {
      onRequest: app.authenticate,
      schema: {
        summary: 'Cancel a notification not sent yet',
        description:
          'Cancels a notification no worker has stored yet (typically one sent with `delayMs`): it is never stored, pushed or shown, and its status says `cancelled`. Cancelling again answers the same. Once stored (`queued` in the inbox, `delivered`), failed or expired, and for a topic send or broadcast: `409 HERALD_ERR_NOT_CANCELLABLE` with its `state`. Only the tenant that sent it.',
        params: Type.Object({ id: Type.String({ minLength: 1, maxLength: 128 }) }),
        response: {
          200: NotificationStatus,
          401: ErrorResponse,
          404: ErrorResponse,
          409: ErrorResponse,
          503: ErrorResponse,
        },
      },
    },
    async (request) => {
      const id = notificationIdOf(request.params.id);
      const { tenantId } = request.identity;
      let outcome: Awaited<ReturnType<typeof app.cancelNotification>>;
      try {
        outcome = await app.withRedisTimeout(
          (async () => {
            const single = await app.cancelNotification(tenantId, id);
            if (single) return single;
            // A topic send or broadcast is not cancelled (its recipients may have it already): 409.
            const fanout = await app.fanoutStatusOf(tenantId, id);
            return fanout && { cancelled: false, status: fanout, fanout: true };
          })(),
        );
      } catch (error) {
        // The cancel may have been sent (and done): a 503 that says so, not "nothing was accepted".
        throw changeUnavailable('Redis', error);
      }
      if (!outcome || outcome.status.tenantId !== tenantId) {
        throw new HttpError(ErrorCode.NOT_FOUND, `No notification ${id} for this API key's tenant`);
      }
      const { tenantId: _tenant, ...visible } = outcome.status;
      if (!outcome.cancelled) {
        throw new HttpError(
          ErrorCode.NOT_CANCELLABLE,
          'fanout' in outcome
            ? `Notification ${id} is a topic send or broadcast (${visible.status}): it cannot be cancelled, as some of its recipients may have it already.`
            : `Notification ${id} is ${visible.status}: it can no longer be cancelled.`,
          { extra: { state: visible.status } },
        );
      }
      return visible;
    },
  );
};

export default statusRoutes;
