import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { InboxError, InboxErrorCode, Preferences } from '@herald/inbox';
import {
  ErrorResponse,
  MuteRequest as MuteBody,
  type MuteRequest,
  PreferencesResponse,
  UserId,
} from '@herald/protocol';
import Type from 'typebox';
import { changeUnavailable, ErrorCode, HttpError, unavailable } from '../../errors.js';
import { INBOX_POLICY } from '../../limits.js';

/** What the preference routes answer besides 200: bad input, no key, too many mutes, limits, Redis down. */
const PREFERENCE_ERRORS = {
  400: ErrorResponse,
  401: ErrorResponse,
  409: ErrorResponse,
  429: ErrorResponse,
  503: ErrorResponse,
};
const Params = Type.Object({ userId: UserId });

/**
 * A user's preferences for the backend: read them, mute and unmute topics and notification types (the
 * user does the same over Socket.IO with their token). A key acts on its own tenant's users only.
 * Limited per API key like the inbox routes (`inbox` policy).
 */
const preferenceRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const preferences = new Preferences(app.redis, { prefix: app.config.inbox.prefix });
  const call = async <T>(run: () => Promise<T>, change = false): Promise<T> => {
    try {
      return await app.withRedisTimeout(run());
    } catch (error) {
      if (error instanceof InboxError) {
        const code =
          error.code === InboxErrorCode.TOO_MANY_MUTES ? ErrorCode.TOO_MANY_MUTES : ErrorCode.VALIDATION;
        // A validation refusal names its field, as the schema's do: the body's names, all together.
        throw new HttpError(code, error.message, {
          cause: error,
          ...(code === ErrorCode.VALIDATION ? { details: [{ field: 'body', message: error.message }] } : {}),
        });
      }
      throw change
        ? changeUnavailable('Preferences (Redis)', error)
        : unavailable('Preferences (Redis)', error);
    }
  };
  const limited = { onRequest: app.authenticate, config: { rateLimit: app.limits.perApiKey(INBOX_POLICY) } };
  const change = async (tenantId: string, userId: string, body: MuteRequest, mute: boolean) => {
    const own = preferences.tenant(tenantId);
    const { changed, muted } = await call(
      () => (mute ? own.mute(userId, body) : own.unmute(userId, body)),
      true,
    );
    return { userId, muted, changed };
  };

  app.get(
    '/users/:userId/preferences',
    {
      ...limited,
      schema: {
        summary: "A user's preferences: the topics and types they muted",
        params: Params,
        response: { 200: PreferencesResponse, ...PREFERENCE_ERRORS },
      },
    },
    async (request) => {
      const { userId } = request.params;
      const muted = await call(() => preferences.tenant(request.identity.tenantId).get(userId));
      return { userId, muted };
    },
  );

  app.put(
    '/users/:userId/preferences/mutes',
    {
      ...limited,
      schema: {
        summary: 'Mute topics and types for a user',
        description:
          'Idempotent (`changed` counts the new mutes). From then on a notification of a muted topic or type is not stored in the user’s inbox nor pushed; its status says `muted`. At most 1,000 mutes per user: a call that would pass it adds nothing (409).',
        params: Params,
        body: MuteBody,
        response: { 200: PreferencesResponse, ...PREFERENCE_ERRORS },
      },
    },
    async (request) => change(request.identity.tenantId, request.params.userId, request.body, true),
  );

  app.delete(
    '/users/:userId/preferences/mutes',
    {
      ...limited,
      schema: {
        summary: 'Unmute topics and types for a user',
        description:
          'Idempotent (`changed` counts the mutes removed). Acts on notifications sent from then on: those muted before are not stored afterwards.',
        params: Params,
        body: MuteBody,
        response: { 200: PreferencesResponse, ...PREFERENCE_ERRORS },
      },
    },
    async (request) => change(request.identity.tenantId, request.params.userId, request.body, false),
  );
};

export default preferenceRoutes;
