import type { RedisClusterHandle } from '@herald/testing';
import { Stack } from './stack.js';

/** A {@link Stack} whose apps run on `cluster` (sharded pub/sub), with `extra` settings on top. */
export function clusterStack(cluster: RedisClusterHandle, extra: Record<string, string> = {}): Stack {
  return new Stack(`redis://127.0.0.1:${cluster.servers[0]?.port}`, {
    HERALD_REDIS_CLUSTER_NODES: cluster.nodesEnv,
    HERALD_PUBSUB_MODE: 'sharded',
    ...extra,
  });
}
