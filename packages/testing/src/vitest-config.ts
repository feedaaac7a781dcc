import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { configDefaults, defineConfig, type ViteUserConfig } from 'vitest/config';
import { clusterRunSetting } from './redis-cluster.js';

/** Path of the global setup that finds (or starts) the Redis the tests use. */
export const redisGlobalSetup = fileURLToPath(new URL('./global-setup.js', import.meta.url));

/**
 * The Vitest config every Herald package uses: unit tests beside the code and integration tests in
 * `test/`, one Redis found by `global-setup`, generous timeouts (real processes on a busy machine).
 * `isolate: false` for packages of process-starting integration tests (see the option).
 * `notOnCluster`: the files a Redis Cluster run (`TEST_REDIS_CLUSTER`, see `global-setup`) leaves out,
 * because they never use the run's Redis (they start a `redis-server` or a Cluster of their own, or none):
 * the run on one Redis runs them, and they would run the same again.
 *
 * @example
 * ```ts
 * // vitest.config.ts
 * export default heraldTestConfig();
 * ```
 */
export function heraldTestConfig(
  options: {
    notOnCluster?: readonly string[];
    /**
     * `false`: a worker runs its files one after another in one module graph instead of a fresh one
     * each. A package whose files each start apps, servers and clients (fastify, BullMQ, ioredis,
     * Socket.IO) then loads them once per worker rather than once per file: measured on the gateway's
     * 33 files, 89 s of imports became 9 s. For files that leave no state behind them (each restores
     * the env it sets, closes what it opens, and mocks no module).
     */
    isolate?: boolean;
  } = {},
): ViteUserConfig {
  const onCluster = clusterRunSetting() !== undefined;
  return defineConfig({
    test: {
      include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
      exclude: [...configDefaults.exclude, ...(onCluster ? (options.notOnCluster ?? []) : [])],
      globalSetup: [redisGlobalSetup],
      testTimeout: 60_000,
      hookTimeout: 60_000,
      // Vitest's default is one worker per core but one: a single worker on a 2-core CI machine, so every
      // file of a package ran after the other. Herald's test files wait mostly on processes, sockets and
      // timers rather than CPU, and each has its own key prefix, queues and ports, so two run side by side.
      maxWorkers: Math.max(2, availableParallelism() - 1),
      isolate: options.isolate ?? true,
    },
  });
}
