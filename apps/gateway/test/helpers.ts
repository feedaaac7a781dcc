import { randomId, redisUrl } from '@herald/testing';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';

export const API_KEY = 'test-key-1';

/** A gateway on the test Redis with its own queue and limiter prefix, built for `inject()`. */
export async function buildTestApp(env: Record<string, string> = {}): Promise<FastifyInstance> {
  const config = loadConfig({
    REDIS_URL: redisUrl(),
    HERALD_API_KEYS: `${API_KEY},test-key-2`,
    HERALD_JWT_SECRET: 'test-secret-0123456789abcdef',
    HERALD_QUEUE_NAME: randomId('queue'),
    HERALD_RATE_LIMIT_PREFIX: `${randomId('rl')}:`,
    HERALD_LOG_LEVEL: 'silent',
    ...env,
  });
  return buildApp(config);
}

export const auth = { authorization: `Bearer ${API_KEY}` };
