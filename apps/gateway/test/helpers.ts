import { isolatedEnv, type RedisServerHandle, startRedisServer } from '@herald/testing';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll } from 'vitest';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { checkAgainstOpenApi, contractProblems } from './openapi-contract.js';

// 32+ bytes each, as the gateway requires outside development mode.
export const API_KEY = 'test-key-1-0123456789abcdef0123456789';
export const API_KEY_2 = 'test-key-2-0123456789abcdef0123456789';
export const JWT_SECRET = 'test-secret-0123456789abcdef0123456789';

/**
 * Environment of a gateway on the test Redis with its own queue, limiter and key prefixes. One job per
 * notification (`HERALD_ENVELOPE_WINDOW_MS=0`), which these tests read by its id; envelopes (the default)
 * have their own tests (envelopes.test.ts, fuzz.test.ts, and the end-to-end tests).
 */
export function testEnv(env: Record<string, string> = {}): Record<string, string> {
  return {
    ...isolatedEnv(),
    HERALD_API_KEYS: `${API_KEY},${API_KEY_2}`,
    HERALD_JWT_SECRET: JWT_SECRET,
    HERALD_ENVELOPE_WINDOW_MS: '0',
    ...env,
  };
}

/**
 * A gateway built for `inject()`. Every answer it sends is checked against its own `/openapi.json`
 * (status, Herald headers, JSON body): `disposeTestApp` fails the test on any mismatch.
 */
export async function buildTestApp(env: Record<string, string> = {}): Promise<FastifyInstance> {
  const app = await buildApp(loadConfig(testEnv({ HERALD_LOG_LEVEL: 'silent', ...env })));
  checkAgainstOpenApi(app);
  return app;
}

/** Closes `app` after removing what it wrote to Redis; fails if an answer contradicted /openapi.json. */
export async function disposeTestApp(app: FastifyInstance): Promise<void> {
  await Promise.all(app.queues.map((queue) => queue.obliterate({ force: true }).catch(() => {})));
  await app.fanoutQueue.obliterate({ force: true }).catch(() => {});
  await app.close();
  const problems = contractProblems(app);
  if (problems.length > 0)
    throw new Error(`Answers that /openapi.json does not document:\n${problems.join('\n')}`);
}

/**
 * buildTestApp() for the test file that awaits it at its top level: one gateway for the file's tests,
 * disposed after them (`disposeTestApp`, so its answers are checked against /openapi.json).
 *
 * @example
 * ```ts
 * const app = await testAppForFile({ HERALD_RATE_LIMIT_BURST: '1000' });
 * ```
 */
export async function testAppForFile(env: Record<string, string> = {}): Promise<FastifyInstance> {
  const app = await buildTestApp(env);
  afterAll(() => disposeTestApp(app));
  return app;
}

export const auth = { authorization: `Bearer ${API_KEY}` };

/** `POST /notify` of `payload` as it is (a string: not re-serialised), authenticated, as `contentType`. */
export async function postRaw(app: FastifyInstance, payload: string, contentType = 'application/json') {
  return await app.inject({
    method: 'POST',
    url: '/notify',
    headers: { ...auth, 'content-type': contentType },
    payload,
  });
}

/**
 * A gateway on a `redis-server` of its own (for outages the test causes), built in `beforeAll` and
 * disposed in `afterAll` (a frozen Redis is resumed first). Read `.app` and `.redis` inside tests.
 */
export function gatewayOnOwnRedis(env: Record<string, string> = {}): {
  app: FastifyInstance;
  redis: RedisServerHandle;
} {
  const handle = {} as { app: FastifyInstance; redis: RedisServerHandle };
  beforeAll(async () => {
    handle.redis = await startRedisServer();
    handle.app = await buildTestApp({ REDIS_URL: handle.redis.url, ...env });
  });
  afterAll(async () => {
    handle.redis.process.kill('SIGCONT');
    await disposeTestApp(handle.app).catch(() => {});
    await handle.redis.dispose();
  });
  return handle;
}
