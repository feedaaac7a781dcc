import { afterAll, beforeAll } from 'vitest';
import { type AppProcess, startApp } from './processes.js';
import { type RedisServerHandle, startRedisServer } from './redis-server.js';

/**
 * An app process on a `redis-server` of its own, for the tests that stop Redis under it: both started
 * in the `beforeAll` of the calling `describe` (the app with `env(redisUrl)`), both stopped in its
 * `afterAll`. Read `.app` and `.redis` inside tests.
 *
 * @example
 * ```ts
 * const own = appOnOwnRedis('worker', entry, (url) => ({ REDIS_URL: url }));
 * it('…', async () => expectHealthThroughOutage(own.app.url, own.redis, { metric: 'herald_worker_jobs_total' }));
 * ```
 */
export function appOnOwnRedis(
  name: string,
  entry: string,
  env: (redisUrl: string) => Record<string, string>,
): { readonly app: AppProcess; readonly redis: RedisServerHandle } {
  const handle = {} as { app: AppProcess; redis: RedisServerHandle };
  beforeAll(async () => {
    handle.redis = await startRedisServer();
    handle.app = await startApp({ name, entry, env: env(handle.redis.url) });
  });
  afterAll(async () => {
    await handle.app?.stop();
    await handle.redis?.dispose();
  });
  return handle;
}
