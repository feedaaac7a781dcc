import { spawnSync } from 'node:child_process';
import { Redis } from 'ioredis';
import { freeLowPort } from './ports.js';
import { type RedisServerHandle, startRedisServer } from './redis-server.js';
import { waitFor } from './wait.js';

/** A local Redis Cluster owned by a test run. */
export interface RedisClusterHandle {
  /** The masters as created, e.g. for `new Cluster(nodes)`. */
  nodes: { host: string; port: number }[];
  /** `127.0.0.1:<port>,…` of every node (masters, then replicas): the format of `REDIS_CLUSTER_NODES`. */
  nodesEnv: string;
  /** Every node's redis-server (masters first, then replicas, as created): to kill, restart, freeze. */
  servers: RedisServerHandle[];
  /** The node that is the master of `key`'s slot now (as the live nodes' `CLUSTER SLOTS` say). */
  masterOf(key: string): Promise<RedisServerHandle>;
  /** The replicas `master` serves now (its `INFO replication`). */
  replicasOf(master: RedisServerHandle): Promise<RedisServerHandle[]>;
  /**
   * Answers once every live node reports `cluster_state:ok`, every slot's master is live, and each
   * master has its replicas in sync (`replicas` of them, default as created; fewer after a failover).
   */
  waitUntilHealthy(options?: { replicas?: number; timeoutMs?: number }): Promise<void>;
  /**
   * Stops `master` (one without a replica) and answers once every other node says the Cluster failed
   * (`cluster_state:fail`): every slot is refused, and a client's ready check fails, from then until
   * `master` is back (`master.restart()`, then {@link RedisClusterHandle.waitUntilHealthy}).
   */
  stopUntilFailed(master: RedisServerHandle): Promise<void>;
  /** Stops every node (SIGTERM, then SIGKILL) and removes their data folders. */
  dispose(): Promise<void>;
}

/**
 * `TEST_REDIS_CLUSTER` when it asks for a Redis Cluster run (`1`, or the `host:port,…` of a running
 * Cluster), else undefined (unset, empty or `0`): read by the global setup and by `heraldTestConfig`.
 */
export function clusterRunSetting(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const value = env.TEST_REDIS_CLUSTER;
  return value === undefined || value === '' || value === '0' ? undefined : value;
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
 * Starts a Redis Cluster of `masters` (default 3) `redis-server --cluster-enabled yes` processes, each
 * with `replicas` replicas (default 0), joins them with `redis-cli --cluster create --cluster-replicas`,
 * and waits until every node reports `cluster_state:ok` and every replica is in sync. Ports are below
 * the ephemeral range, with the cluster bus at port + 6000 (`--cluster-port`). `nodeTimeoutMs`
 * (`cluster-node-timeout`, default 2000) is how long a master may be silent before its replica takes
 * over. Needs `redis-server` and `redis-cli` on PATH.
 *
 * @example
 * ```ts
 * const cluster = await startRedisCluster({ masters: 3, replicas: 1, nodeTimeoutMs: 1000 });
 * const client = new Cluster(cluster.nodes);
 * // …
 * await cluster.dispose();
 * ```
 */
export async function startRedisCluster(
  options: {
    masters?: number;
    replicas?: number;
    nodeTimeoutMs?: number;
    /** Every node's `requirepass` and `masterauth`; the servers' `url`s carry it. */
    password?: string;
    /** More `redis-server` arguments for every node (e.g. `['--appendonly', 'yes']`: a restart keeps the data). */
    args?: string[];
  } = {},
): Promise<RedisClusterHandle> {
  const masters = options.masters ?? 3;
  const replicas = options.replicas ?? 0;
  const servers: RedisServerHandle[] = [];
  // One open probe connection per node (reconnecting every 100 ms), rather than one per probe: under
  // load a fresh connection's connect timeout is missed again and again, and a failover seen late.
  const probes = new Map<number, Redis>();
  const probe = (server: RedisServerHandle): Redis => {
    let client = probes.get(server.port);
    if (client === undefined) {
      client = new Redis(server.url, {
        enableOfflineQueue: false,
        maxRetriesPerRequest: 0,
        retryStrategy: () => 100,
      });
      client.on('error', () => {});
      probes.set(server.port, client);
    }
    return client;
  };
  const dispose = async (): Promise<void> => {
    for (const client of probes.values()) client.disconnect();
    await Promise.all(servers.map((server) => server.dispose()));
  };

  const masterOf = async (key: string): Promise<RedisServerHandle> => {
    // The first node that answers (the killed one does not) tells.
    for (const server of servers) {
      const owner = await (async (client: Redis) => {
        const slot = (await client.cluster('KEYSLOT', key)) as number;
        const ranges = await client.cluster('SLOTS');
        return ranges.find(([from, to]) => from <= slot && slot <= to)?.[2]?.[1];
      })(probe(server)).catch(() => undefined);
      const found = servers.find((candidate) => candidate.port === owner);
      if (found) return found;
    }
    throw new Error(`no live node knows the master of "${key}"`);
  };
  const replicasOf = async (master: RedisServerHandle): Promise<RedisServerHandle[]> => {
    const replication = await probe(master).info('replication');
    // slave0:ip=127.0.0.1,port=7001,state=online,…
    const ports = [...replication.matchAll(/^slave\d+:.*port=(\d+)/gm)].map((match) => Number(match[1]));
    return servers.filter((server) => ports.includes(server.port));
  };
  const waitUntilHealthy = async (wait: { replicas?: number; timeoutMs?: number } = {}): Promise<void> => {
    const wanted = wait.replicas ?? replicas;
    let seen = '';
    await waitFor(
      async () => {
        // A node that does not answer is taken for dead (the killed one), one probe per node.
        const probed = await Promise.all(servers.map((server) => healthOf(probe(server))));
        const states = probed.filter((state) => state !== undefined);
        seen = JSON.stringify(servers.map((server, i) => ({ port: server.port, ...probed[i] })));
        return (
          states.every((state) => state.ok) &&
          states.filter((state) => state.master && state.slots).length === masters &&
          states.every((state) => !state.master || !state.slots || state.syncedReplicas >= wanted)
        );
      },
      {
        timeoutMs: wait.timeoutMs ?? 20_000,
        intervalMs: 100,
        what: 'the cluster healthy (state ok, replicas in sync)',
      },
    ).catch((error: unknown) => {
      throw new Error(`${error instanceof Error ? error.message : String(error)}; last seen: ${seen}`);
    });
  };

  const stopUntilFailed = async (master: RedisServerHandle): Promise<void> => {
    await master.stop();
    const others = servers.filter((server) => server !== master);
    await waitFor(
      async () =>
        (await Promise.all(others.map((server) => probe(server).cluster('INFO')))).every((info) =>
          /cluster_state:fail/.test(info),
        ),
      { timeoutMs: 15_000, what: `the Cluster failed (master on port ${master.port} down, no replica)` },
    );
  };

  try {
    // Each node is a plain test redis-server (free port, temp folder) with cluster mode on.
    for (let i = 0; i < masters * (1 + replicas); i++) {
      const port = await freeLowPort(6000);
      servers.push(
        await startRedisServer({
          port,
          // Also for a restart under load (a chaos scenario's), when a starved event loop misses the
          // probes' 1 s connect timeout again and again.
          startTimeoutMs: 60_000,
          ...(options.password === undefined ? {} : { password: options.password }),
          args: [
            '--cluster-enabled',
            'yes',
            '--cluster-config-file',
            'nodes.conf',
            '--cluster-port',
            String(port + 6000),
            '--cluster-node-timeout',
            String(options.nodeTimeoutMs ?? 2000),
            // A replica syncs at once (the default waits 5 s for more replicas to share the transfer).
            '--repl-diskless-sync-delay',
            '0',
            ...(options.args ?? []),
          ],
        }),
      );
    }
    const create = spawnSync(
      'redis-cli',
      [
        ...(options.password === undefined ? [] : ['-a', options.password, '--no-auth-warning']),
        '--cluster',
        'create',
        ...servers.map((server) => `127.0.0.1:${server.port}`),
        '--cluster-replicas',
        String(replicas),
        '--cluster-yes',
      ],
      { encoding: 'utf8', timeout: 30_000 },
    );
    if (create.status !== 0) {
      throw new Error(
        `redis-cli --cluster create failed (${create.status}):\n${create.stdout}\n${create.stderr}`,
      );
    }
    await waitUntilHealthy();
  } catch (error) {
    await dispose();
    throw error;
  }
  // redis-cli makes the first `masters` nodes the masters; the list is reordered to say so if it did not.
  const roles = await Promise.all(servers.map((server) => healthOf(probe(server))));
  const ordered = [
    ...servers.filter((_, i) => roles[i]?.master),
    ...servers.filter((_, i) => !roles[i]?.master),
  ];
  servers.splice(0, servers.length, ...ordered);
  const nodes = servers.slice(0, masters).map((server) => ({ host: '127.0.0.1', port: server.port }));
  return {
    nodes,
    nodesEnv: servers.map((server) => `127.0.0.1:${server.port}`).join(','),
    servers,
    masterOf,
    replicasOf,
    waitUntilHealthy,
    stopUntilFailed,
    dispose,
  };
}

/**
 * One node's view: cluster state ok, its role, whether it serves slots, how many replicas are in sync;
 * undefined when it does not answer.
 */
async function healthOf(
  client: Redis,
): Promise<{ ok: boolean; master: boolean; slots: boolean; syncedReplicas: number } | undefined> {
  return (async () => {
    const [cluster, replication, nodes] = await Promise.all([
      client.cluster('INFO') as Promise<string>,
      client.info('replication'),
      client.cluster('NODES') as Promise<string>,
    ]);
    const me = nodes.split('\n').find((line) => line.includes('myself')) ?? '';
    const master = /(^|\s)role:master(\s|$)/m.test(replication);
    // slave0:ip=…,port=…,state=online,offset=…,lag=0
    const syncedReplicas = (replication.match(/^slave\d+:.*state=online/gm) ?? []).length;
    return {
      ok: cluster.includes('cluster_state:ok'),
      master,
      // Slot ranges follow the 8 fixed fields of a CLUSTER NODES line.
      slots: me.trim().split(' ').length > 8,
      syncedReplicas,
    };
  })().catch(() => undefined);
}
