import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const findRedis = fileURLToPath(import.meta.resolve('@herald/testing/global-setup'));
const startCluster = fileURLToPath(new URL('./test/support/cluster-global-setup.ts', import.meta.url));

// Two projects: the whole suite against one Redis (REDIS_URL, testcontainers or a redis-server), and the
// limiter's Redis-facing tests again against a 3-master Redis Cluster (REDIS_CLUSTER_NODES, else one
// started here with `startRedisCluster`).
export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    projects: [
      {
        extends: true,
        test: {
          name: 'single',
          include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
          exclude: ['test/**/*.cluster.test.ts'],
          globalSetup: [findRedis],
          provide: { redisMode: 'single' },
        },
      },
      {
        extends: true,
        test: {
          name: 'cluster',
          include: [
            'test/exact.test.ts',
            'test/limiter.test.ts',
            'test/multi-id.test.ts',
            'test/properties.test.ts',
            'test/**/*.cluster.test.ts',
          ],
          globalSetup: [findRedis, startCluster],
          provide: { redisMode: 'cluster' },
        },
      },
    ],
  },
});
