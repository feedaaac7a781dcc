import { type RedisClusterHandle, type RedisServerHandle, waitFor } from '@herald/testing';
import { Redis } from 'ioredis';
import { Stack } from './stack.js';

/** A {@link Stack} whose apps run on `cluster` (sharded pub/sub), with `extra` settings on top. */
export function clusterStack(cluster: RedisClusterHandle, extra: Record<string, string> = {}): Stack {
  return new Stack(`redis://127.0.0.1:${cluster.servers[0]?.port}`, {
    HERALD_REDIS_CLUSTER_NODES: cluster.nodesEnv,
    HERALD_PUBSUB_MODE: 'sharded',
    ...extra,
  });
}

/**
 * Stops `master` (one without a replica) and waits until the Cluster says it failed (`cluster_state:fail`
 * on another node): every slot is refused from then until `master` is back.
 */
export async function stopUntilClusterFails(
  cluster: RedisClusterHandle,
  master: RedisServerHandle | undefined,
): Promise<void> {
  const other = cluster.servers.find((server) => server !== master);
  const probe = new Redis(other?.url ?? '');
  try {
    await master?.stop();
    await waitFor(async () => /cluster_state:fail/.test(await probe.cluster('INFO')), {
      timeoutMs: 15_000,
      what: 'the Cluster failed (a master without a replica down)',
    });
  } finally {
    probe.disconnect();
  }
}
