import { existsSync } from 'node:fs';
import type { TestProject } from 'vitest/node';
import { clusterRunSetting, parseClusterNodes, startRedisCluster } from './redis-cluster.js';
import { hasRedisServerBinary, type RedisServerHandle, startRedisServer } from './redis-server.js';

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string;
    /**
     * `host:port,…` of the Redis Cluster the run uses (`TEST_REDIS_CLUSTER`), or "" on one Redis. Read it
     * through `onRedisCluster()` / `testRedis()` / `isolatedEnv()` from `@herald/testing`.
     */
    redisCluster: string;
  }
}

/**
 * Vitest global setup: finds the Redis the tests use, the way the ecosystem expects:
 * 1. `REDIS_URL` when set;
 * 2. otherwise a Redis container through testcontainers when a Docker engine answers;
 * 3. otherwise a `redis-server` started here on a free port (stopped after the run).
 * Tests read it with `inject('redisUrl')` (or `redisUrl()` from `@herald/testing`).
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const cluster = clusterRunSetting();
  if (cluster !== undefined) return await setupCluster(project, cluster);
  project.provide('redisCluster', '');
  const fromEnv = process.env.REDIS_URL;
  if (fromEnv) {
    project.provide('redisUrl', fromEnv);
    return async () => {};
  }
  if (dockerMayAnswer()) {
    try {
      const { GenericContainer, Wait } = await import('testcontainers');
      const container = await new GenericContainer('redis:7-alpine')
        .withExposedPorts(6379)
        .withWaitStrategy(Wait.forLogMessage('Ready to accept connections'))
        .start();
      project.provide('redisUrl', `redis://${container.getHost()}:${container.getMappedPort(6379)}`);
      return async () => {
        await container.stop();
      };
    } catch (error) {
      process.stderr.write(`[herald] testcontainers could not start Redis, falling back: ${String(error)}\n`);
    }
  }
  if (!hasRedisServerBinary()) {
    throw new Error(
      'Tests need Redis: set REDIS_URL, start a Docker engine (testcontainers), or install redis-server.',
    );
  }
  const server: RedisServerHandle = await startRedisServer();
  process.stderr.write(`[herald] tests use a redis-server started on ${server.url}\n`);
  project.provide('redisUrl', server.url);
  return () => server.dispose();
}

/**
 * `TEST_REDIS_CLUSTER=1`: the run's shared Redis is a Redis Cluster of 3 masters started here (stopped
 * after the run); `TEST_REDIS_CLUSTER=host:port,…`: the Cluster at those nodes. Every app a test starts
 * with `isolatedEnv()` then runs on it (`HERALD_REDIS_CLUSTER_NODES`, sharded pub/sub, 3 queue
 * partitions), and `testRedis()` answers a Cluster client.
 */
async function setupCluster(project: TestProject, value: string): Promise<() => Promise<void>> {
  if (value !== '1') {
    const nodes = parseClusterNodes(value);
    project.provide('redisCluster', value);
    project.provide('redisUrl', `redis://${nodes[0]?.host}:${nodes[0]?.port}`);
    return async () => {};
  }
  const started = await startRedisCluster({ masters: 3 });
  process.stderr.write(`[herald] tests use a Redis Cluster started on ${started.nodesEnv}\n`);
  project.provide('redisCluster', started.nodesEnv);
  project.provide('redisUrl', `redis://${started.nodes[0]?.host}:${started.nodes[0]?.port}`);
  return () => started.dispose();
}

function dockerMayAnswer(): boolean {
  return Boolean(process.env.DOCKER_HOST) || existsSync('/var/run/docker.sock');
}
