import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ErrorResponse, signUserToken, TokenRequest, TokenResponse } from '@herald/protocol';
import { TOKENS_POLICY } from '../limits.js';

/** `POST /tokens`: a backend gets the token its browser connects with as `userId`. */
export const tokenRoutes: FastifyPluginAsyncTypebox = async (app) => {
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
        secret: app.config.jwtSecret,
        ttlSeconds: app.config.tokenTtlSeconds,
      });
      return { token, expiresAt: expiresAt.toISOString() };
    },
  );
};
