import { randomId, redisUrl } from '@herald/testing';
import { Cluster, Redis } from 'ioredis';
import { afterAll, inject } from 'vitest';

declare module 'vitest' {
  export interface ProvidedContext {
    redisMode: 'single' | 'cluster';
    redisClusterNodes: { host: string; port: number }[];
  }
}

/** Options every limiter client in the tests uses: the ones the README asks of production callers. */
export const LIMITER_CLIENT_OPTIONS = {
  enableOfflineQueue: false,
  autoResendUnfulfilledCommands: false,
  maxRetriesPerRequest: 1,
} as const;

/** True when this project runs against the Redis Cluster. */
export function onCluster(): boolean {
  return inject('redisMode') === 'cluster';
}

/** A client of this project's Redis: the single node, or the cluster. The caller disconnects it. */
export async function connectRedis(): Promise<Redis | Cluster> {
  if (onCluster()) {
    const cluster = new Cluster(inject('redisClusterNodes'), {
      redisOptions: LIMITER_CLIENT_OPTIONS,
      enableOfflineQueue: false,
    });
    await new Promise<void>((resolve, reject) => {
      cluster.once('ready', () => resolve());
      cluster.once('error', reject);
    });
    return cluster;
  }
  const redis = new Redis(redisUrl(), { ...LIMITER_CLIENT_OPTIONS, lazyConnect: true });
  await redis.connect();
  return redis;
}

/**
 * connectRedis() for the test file that awaits it at its top level: one client for the file's tests,
 * disconnected after them.
 *
 * @example
 * ```ts
 * const redis = await connectRedisForFile();
 * ```
 */
export async function connectRedisForFile(): Promise<Redis | Cluster> {
  const redis = await connectRedis();
  afterAll(() => redis.disconnect());
  return redis;
}

/** A key prefix no other test uses. */
export function randomPrefix(): string {
  return `${randomId('rl')}:`;
}
