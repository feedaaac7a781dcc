import { spawnSync } from 'node:child_process';
import { type RedisServerHandle, startRedisServer, withProbeClient } from './redis-server.js';
import { waitFor } from './wait.js';

/** A local Redis Cluster owned by a test run. */
export interface RedisClusterHandle {
  /** The masters, e.g. for `new Cluster(nodes)`. */
  nodes: { host: string; port: number }[];
  /** `127.0.0.1:<port>,…`: the format of `REDIS_CLUSTER_NODES`. */
  nodesEnv: string;
  /** Stops every node (SIGTERM, then SIGKILL) and removes their data folders. */
  dispose(): Promise<void>;
}

/**
 * Parses `REDIS_CLUSTER_NODES` (`host:port,host:port,…`) into ioredis Cluster startup nodes.
 *
 * @example
 * ```ts
 * const cluster = new Cluster(parseClusterNodes('127.0.0.1:7000,127.0.0.1:7001'));
 * ```
 */
export function parseClusterNodes(value: string): { host: string; port: number }[] {
  return value
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean)
    .map((entry) => {
      const at = entry.lastIndexOf(':');
      const port = Number(entry.slice(at + 1));
      if (at <= 0 || !Number.isInteger(port)) {
        throw new Error(`REDIS_CLUSTER_NODES: "${entry}" is not host:port`);
      }
      return { host: entry.slice(0, at), port };
    });
}

/**
 * Starts a Redis Cluster of `masters` (default 3) `redis-server --cluster-enabled yes` processes on free
 * ports with no replicas, joins them with `redis-cli --cluster create`, and waits until every node
 * reports `cluster_state:ok`. Needs `redis-server` and `redis-cli` on PATH.
 *
 * @example
 * ```ts
 * const cluster = await startRedisCluster();
 * const client = new Cluster(cluster.nodes);
 * // …
 * await cluster.dispose();
 * ```
 */
export async function startRedisCluster(options: { masters?: number } = {}): Promise<RedisClusterHandle> {
  const masters = options.masters ?? 3;
  const servers: RedisServerHandle[] = [];
  const dispose = async (): Promise<void> => {
    await Promise.all(servers.map((server) => server.dispose()));
  };
  let nodes: { host: string; port: number }[] = [];

  try {
    // Each node is a plain test redis-server (free port, temp folder) with cluster mode on.
    for (let i = 0; i < masters; i++) {
      servers.push(
        await startRedisServer({
          args: [
            '--cluster-enabled',
            'yes',
            '--cluster-config-file',
            'nodes.conf',
            '--cluster-node-timeout',
            '2000',
          ],
        }),
      );
    }
    nodes = servers.map((server) => ({ host: '127.0.0.1', port: server.port }));
    const create = spawnSync(
      'redis-cli',
      [
        '--cluster',
        'create',
        ...nodes.map((n) => `${n.host}:${n.port}`),
        '--cluster-replicas',
        '0',
        '--cluster-yes',
      ],
      { encoding: 'utf8', timeout: 30_000 },
    );
    if (create.status !== 0) {
      throw new Error(
        `redis-cli --cluster create failed (${create.status}):\n${create.stdout}\n${create.stderr}`,
      );
    }
    for (const node of nodes) {
      await waitFor(async () => (await clusterInfo(node.port)).includes('cluster_state:ok'), {
        timeoutMs: 20_000,
        what: `cluster_state:ok on port ${node.port}`,
      });
    }
  } catch (error) {
    await dispose();
    throw error;
  }
  return { nodes, nodesEnv: nodes.map((n) => `${n.host}:${n.port}`).join(','), dispose };
}

async function clusterInfo(port: number): Promise<string> {
  return withProbeClient(`redis://127.0.0.1:${port}`, (client) => client.cluster('INFO') as Promise<string>);
}
