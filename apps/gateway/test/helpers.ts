import { randomId, redisUrl } from '@herald/testing';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';

// 32+ bytes each, as the gateway requires outside development mode.
export const API_KEY = 'test-key-1-0123456789abcdef0123456789';
export const API_KEY_2 = 'test-key-2-0123456789abcdef0123456789';
export const JWT_SECRET = 'test-secret-0123456789abcdef0123456789';

/** Environment of a gateway on the test Redis with its own queue, limiter and key prefixes. */
export function testEnv(env: Record<string, string> = {}): Record<string, string> {
  return {
    REDIS_URL: redisUrl(),
    HERALD_API_KEYS: `${API_KEY},${API_KEY_2}`,
    HERALD_JWT_SECRET: JWT_SECRET,
    HERALD_QUEUE_NAME: randomId('queue'),
    HERALD_RATE_LIMIT_PREFIX: `${randomId('rl')}:`,
    HERALD_KEY_PREFIX: `${randomId('herald')}:`,
    ...env,
  };
}

/** A gateway built for `inject()`; `cleanup()` empties its queue and closes it. */
export async function buildTestApp(env: Record<string, string> = {}): Promise<FastifyInstance> {
  return buildApp(loadConfig(testEnv({ HERALD_LOG_LEVEL: 'silent', ...env })));
}

/** Closes `app` after removing what it wrote to Redis. */
export async function disposeTestApp(app: FastifyInstance): Promise<void> {
  await app.queue.obliterate({ force: true }).catch(() => {});
  await app.close();
}

export const auth = { authorization: `Bearer ${API_KEY}` };
