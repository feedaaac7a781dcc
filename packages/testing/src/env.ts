import { inject } from 'vitest';
import { randomId } from './wait.js';

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
    REDIS_URL: redisUrl,
    HERALD_QUEUE_NAME: randomId('queue'),
    HERALD_DEPLOYMENT: randomId('deployment'),
    HERALD_PUBSUB_KEY: randomId('pubsub'),
    HERALD_INBOX_PREFIX: `${randomId('inbox')}:`,
    HERALD_RATE_LIMIT_PREFIX: `${randomId('rl')}:`,
    HERALD_KEY_PREFIX: `${randomId('herald')}:`,
  };
}
