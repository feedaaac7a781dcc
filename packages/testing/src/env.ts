import { inject } from 'vitest';
import { randomId } from './wait.js';

/** Queue partitions of every app on the run's Redis Cluster: one per master. */
const CLUSTER_QUEUE_PARTITIONS = 3;

/**
 * The settings that keep one test's Herald apps apart from every other test's on the shared Redis: the
 * test Redis, and a random queue name, deployment, pub/sub key and key prefixes. Spread it into an
 * app's environment, then add the test's own settings.
 *
 * @example
 * ```ts
 * const env = { ...isolatedEnv(), HERALD_API_KEYS: API_KEY, HERALD_JWT_SECRET: SECRET };
 * ```
 */
export function isolatedEnv(redisUrl: string = inject('redisUrl')): Record<string, string> {
  return {
    ...redisEnv(redisUrl),
    HERALD_QUEUE_NAME: randomId('queue'),
    HERALD_DEPLOYMENT: randomId('deployment'),
    HERALD_PUBSUB_KEY: randomId('pubsub'),
    HERALD_INBOX_PREFIX: `${randomId('inbox')}:`,
    HERALD_RATE_LIMIT_PREFIX: `${randomId('rl')}:`,
    HERALD_KEY_PREFIX: `${randomId('herald')}:`,
  };
}

/**
 * Where an app finds `redisUrl` (default the test run's Redis): `REDIS_URL`, and on the run's Redis
 * Cluster (`TEST_REDIS_CLUSTER`) what a Cluster deployment sets: its nodes, sharded pub/sub and a queue
 * partition per master (and a limiter timeout for a Cluster on a busy machine).
 */
export function redisEnv(redisUrl: string = inject('redisUrl')): Record<string, string> {
  const cluster = redisUrl === provided('redisUrl') ? inject('redisCluster') : '';
  if (!cluster) return { REDIS_URL: redisUrl };
  return {
    REDIS_URL: redisUrl,
    HERALD_REDIS_CLUSTER_NODES: cluster,
    HERALD_PUBSUB_MODE: 'sharded',
    HERALD_QUEUE_PARTITIONS: String(CLUSTER_QUEUE_PARTITIONS),
    // Three masters, the apps and Chromium on 2 cores answer some limiter decisions later than the
    // default 150 ms: a gateway would answer those 503 (apps/gateway/test/limiter-timeout.test.ts
    // tests that answer on a Redis of its own).
    HERALD_RATE_LIMIT_TIMEOUT_MS: '600',
  };
}

/**
 * What the test run's global setup provided for `key`; undefined outside a Vitest run (a benchmark,
 * bench/soak, builds its stack with an explicit Redis URL and no Cluster).
 */
function provided(key: 'redisUrl'): string | undefined {
  try {
    return inject(key);
  } catch {
    return undefined;
  }
}
