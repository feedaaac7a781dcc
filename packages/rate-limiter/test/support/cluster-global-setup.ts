import { parseClusterNodes, startRedisCluster } from '@herald/testing';
import type { TestProject } from 'vitest/node';

/**
 * Vitest global setup of the `cluster` project: `REDIS_CLUSTER_NODES` when set, otherwise a 3-master
 * cluster started here (and stopped after the run).
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const fromEnv = process.env.REDIS_CLUSTER_NODES;
  if (fromEnv) {
    project.provide('redisClusterNodes', parseClusterNodes(fromEnv));
    return async () => {};
  }
  const cluster = await startRedisCluster({ masters: 3 });
  process.stderr.write(`[herald] rate-limiter cluster tests use a cluster started on ${cluster.nodesEnv}\n`);
  project.provide('redisClusterNodes', cluster.nodes);
  return () => cluster.dispose();
}
