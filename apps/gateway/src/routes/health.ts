import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ErrorResponse } from '@herald/protocol';
import Type from 'typebox';
import { unavailable } from '../errors.js';

/** `GET /healthz`: 200 when Redis answers PING within a second, else 503. */
export const healthRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/healthz',
    {
      schema: {
        summary: 'Liveness: Redis answers',
        response: { 200: Type.Object({ status: Type.Literal('ok') }), 503: ErrorResponse },
      },
    },
    async () => {
      try {
        await withTimeout(app.redis.ping(), 1000);
      } catch (error) {
        throw unavailable('Redis', error);
      }
      return { status: 'ok' as const };
    },
  );
};

async function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
