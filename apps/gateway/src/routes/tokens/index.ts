import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ErrorResponse, signUserToken, TokenRequest, TokenResponse } from '@herald/protocol';
import { TOKENS_POLICY } from '../../limits.js';

/**
 * `POST /tokens`: a backend gets the token its browser connects with as `userId` of the key's tenant.
 * The token carries the tenant and the key's id: it reaches only that tenant's user, and dies with the key;
 * with `topics`, also the topics the user may subscribe to themselves (the socket's `subscribe`).
 */
const tokenRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.post(
    '/tokens',
    {
      onRequest: app.authenticate,
      config: { rateLimit: app.limits.perApiKey(TOKENS_POLICY) },
      schema: {
        summary: 'Issue a user token for the realtime connection',
        body: TokenRequest,
        response: { 200: TokenResponse, '4xx': ErrorResponse },
      },
    },
    async (request) => {
      const { token, expiresAt } = await signUserToken({
        userId: request.body.userId,
        tenantId: request.identity.tenantId,
        keyId: request.identity.id,
        secret: app.config.jwtSecret,
        ttlSeconds: app.config.tokenTtlSeconds,
        // Redis's clock, which realtime judges `exp` by: a gateway whose clock is off mints none stale.
        now: new Date(app.clock.now()),
        topics: request.body.topics,
      });
      return { token, expiresAt: expiresAt.toISOString() };
    },
  );
};

export default tokenRoutes;
