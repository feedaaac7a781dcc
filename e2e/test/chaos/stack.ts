import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import {
  type AppProcess,
  freePort,
  type RedisClusterHandle,
  type RedisServerHandle,
  skewedClock,
  startApp,
  startRedisServer,
  waitFor,
} from '@herald/testing';
import { Redis } from 'ioredis';
import { API_KEY, entries, SECRET, stackEnv } from '../support/stack.js';
import { ChaosClient } from './client.js';
import { type ChaosResult, check } from './ledger.js';
import { LoadGenerator } from './load.js';

export type { ChaosResult } from './ledger.js';

export type Kind = keyof typeof entries;

/** Settings of every chaos stack (documented in the README's chaos section). */
export const CHAOS_ENV: Record<string, string> = {
  // A dead worker's active jobs are taken over within about 3 s, not 15 s (the defaults 10 s + 5 s).
  HERALD_WORKER_LOCK_MS: '2000',
  HERALD_WORKER_STALLED_INTERVAL_MS: '1000',
  // The load generator is one sender at a steady rate, far below these.
  HERALD_SENDER_RATE_LIMIT_PER_SECOND: '10000',
  HERALD_SENDER_RATE_LIMIT_BURST: '10000',
  HERALD_RATE_LIMIT_PER_SECOND: '1000',
  HERALD_RATE_LIMIT_BURST: '1000',
};

/**
 * One chaos run's processes, each its own OS process, on a private `redis-server` (append-only, fsync
 * always, so that stopping it loses nothing accepted) or on a Redis Cluster the scenario started:
 * gateways, workers and realtime instances that a scenario kills, freezes or cuts off, and replaces.
 */
export class ChaosStack {
  readonly env: Record<string, string>;
  readonly apps: Record<Kind, AppProcess[]> = { gateway: [], worker: [], realtime: [] };
  readonly #all: AppProcess[] = [];
  readonly #server: RedisServerHandle | undefined;
  /** The Redis Cluster of a stack made by {@link ChaosStack.onCluster} (the caller disposes of it). */
  readonly cluster: RedisClusterHandle | undefined;
  #clients: ChaosClient[] = [];
  #count = 0;

  private constructor(
    target: { server: RedisServerHandle } | { cluster: RedisClusterHandle },
    env: Record<string, string> = {},
  ) {
    if ('server' in target) {
      this.#server = target.server;
      this.env = stackEnv(target.server.url, { ...CHAOS_ENV, ...env });
    } else {
      this.cluster = target.cluster;
      this.env = stackEnv(`redis://${target.cluster.nodesEnv.split(',')[0]}`, {
        ...CHAOS_ENV,
        HERALD_REDIS_CLUSTER_NODES: target.cluster.nodesEnv,
        HERALD_PUBSUB_MODE: 'sharded',
        ...env,
      });
    }
  }

  /** The private redis-server of a stack made by {@link ChaosStack.create}. */
  get redis(): RedisServerHandle {
    if (this.#server === undefined) throw new Error('this chaos stack runs on a Redis Cluster');
    return this.#server;
  }

  /**
   * A stack on its own `redis-server`, append-only with fsync always (what a Redis stopped mid-scenario
   * needs to lose nothing); `redisArgs` come after on its command line, so they may override those (a
   * later option wins); `env` replaces or adds to {@link CHAOS_ENV} for its processes.
   */
  static async create(
    options: { env?: Record<string, string>; redisArgs?: string[] } = {},
  ): Promise<ChaosStack> {
    // A port below Linux's ephemeral range (32768–60999): while Redis is stopped, the apps' reconnects
    // to a free ephemeral port can connect to themselves (TCP self-connect) and hold it, and Redis could
    // not start again on it (seen once with a 30 s stop).
    for (let attempt = 1; ; attempt++) {
      const port = 20_000 + Math.floor(Math.random() * 12_000);
      try {
        return new ChaosStack(
          {
            server: await startRedisServer({
              port,
              args: ['--appendonly', 'yes', '--appendfsync', 'always', ...(options.redisArgs ?? [])],
            }),
          },
          options.env ?? {},
        );
      } catch (error) {
        if (attempt >= 5) throw error;
      }
    }
  }

  /** A stack on `cluster` (sharded pub/sub), with `extra` settings for every process. */
  static onCluster(cluster: RedisClusterHandle, extra: Record<string, string> = {}): ChaosStack {
    return new ChaosStack({ cluster }, extra);
  }

  /**
   * Starts one more `kind` process, its wall clock off by `clockSkew` when given (`skewedClock` of
   * @herald/testing, e.g. '+30s'). A gateway or realtime instance of a stack logging below `info`
   * (which never logs `listening`) gets a free port and is up once it answers HTTP there.
   */
  async start(kind: Kind, clockSkew?: string): Promise<AppProcess> {
    const name = `${kind}-${++this.#count}`;
    const quiet = !['trace', 'debug', 'info'].includes(this.env.HERALD_LOG_LEVEL ?? 'info');
    const app = await startApp({
      name,
      entry: entries[kind],
      env: {
        ...this.env,
        HERALD_INSTANCE_ID: name,
        ...(clockSkew === undefined ? {} : skewedClock(clockSkew)),
      },
      // Five processes start at once on a shared 2-core machine (one gateway alone took 10 s at a load
      // average of 30): a start is not a timed result.
      timeoutMs: 60_000,
      ...(quiet && kind !== 'worker' ? { port: await freePort() } : {}),
    });
    this.#all.push(app);
    this.apps[kind].push(app);
    return app;
  }

  /** `kill -9` of `app`, once it has exited it is no longer one of its kind's. */
  async kill(app: AppProcess): Promise<void> {
    await app.stop('SIGKILL', 0);
    for (const list of Object.values(this.apps)) {
      const at = list.indexOf(app);
      if (at >= 0) list.splice(at, 1);
    }
  }

  urls(kind: Kind): string[] {
    return this.apps[kind].map((app) => app.url);
  }

  /** Connects one client per user, spread over the realtime instances, and waits for their `synced`. */
  clients(users: readonly string[]): ChaosClient[] {
    this.#clients = users.map(
      (user, i) =>
        new ChaosClient(user, { realtimes: () => this.urls('realtime'), secret: SECRET, first: i }),
    );
    for (const client of this.#clients) client.connect();
    return this.#clients;
  }

  load(users: readonly string[], perSecond: number, options: { maxInFlight?: number } = {}): LoadGenerator {
    return new LoadGenerator({
      gateways: () => this.urls('gateway'),
      apiKey: API_KEY,
      users,
      perSecond,
      ...options,
    });
  }

  /**
   * A network partition between `app` and Redis for `ms`: its connections (found by their local ports,
   * from /proc) are cut with `CLIENT KILL ID`, and cut again as soon as they come back, while every other
   * process keeps its own. Answers how many connections were cut.
   */
  async partition(app: AppProcess, ms: number): Promise<number> {
    const redis = new Redis(this.redis.url, { maxRetriesPerRequest: 1 });
    const pid = app.process.pid ?? 0;
    try {
      let cut = 0;
      const until = Date.now() + ms;
      while (Date.now() < until) {
        const ports = localPorts(pid);
        const list = (await redis.call('CLIENT', 'LIST')) as string;
        for (const line of list.split('\n')) {
          const match = /(?:^|\s)id=(\d+) addr=[^\s]*:(\d+)\s/.exec(line);
          if (match?.[1] && ports.has(Number(match[2])))
            cut += Number(await redis.call('CLIENT', 'KILL', 'ID', match[1]));
        }
        await pause(20);
      }
      return cut;
    } finally {
      redis.disconnect();
    }
  }

  async dispose(): Promise<void> {
    for (const client of this.#clients) client.close();
    await Promise.all(this.#all.map((app) => app.stop('SIGTERM', 3000)));
    const server = this.#server;
    if (server === undefined) return;
    if (server.process.signalCode === 'SIGSTOP' || server.process.exitCode === null)
      server.process.kill('SIGCONT');
    await server.dispose();
  }
}

/**
 * One scenario: `users` clients, load at `perSecond` for `warmupMs`, then `fault` (which answers when
 * the fault ends: a replacement is up, Redis answers again), load for `afterMs` more, then waits for
 * every accepted notification to be shown (up to `drainMs`) and checks the ledger.
 */
export async function runScenario(
  stack: ChaosStack,
  options: {
    scenario: string;
    users: number;
    perSecond: number;
    warmupMs: number;
    afterMs: number;
    drainMs?: number;
    fault: () => Promise<void>;
  },
): Promise<ChaosResult & { refusals: string[] }> {
  const { users, clients } = await connectUsers(stack, options.users);
  const load = stack.load(users, options.perSecond);
  load.start();
  await pause(options.warmupMs);
  await options.fault();
  const faultEndAt = Date.now();
  await pause(options.afterMs);
  return await drainAndCheck(load, clients, { ...options, faultEndAt });
}

/** `count` users named after the stack's deployment, one {@link ChaosClient} each, all synced. */
export async function connectUsers(
  stack: ChaosStack,
  count: number,
): Promise<{ users: string[]; clients: ChaosClient[] }> {
  const users = Array.from({ length: count }, (_, i) => `chaos-${i}-${stack.env.HERALD_DEPLOYMENT}`);
  const clients = stack.clients(users);
  await waitFor(() => clients.every((client) => client.synced), {
    timeoutMs: 20_000,
    what: 'clients synced',
  });
  return { users, clients };
}

/**
 * Stops `load` (every request started ends in a 202 or its deadline), waits for every accepted
 * notification to be shown (up to `drainMs`) and checks the ledger against what `clients` were shown.
 */
export async function drainAndCheck(
  load: LoadGenerator,
  clients: readonly ChaosClient[],
  options: { scenario: string; faultEndAt: number; drainMs?: number },
): Promise<ChaosResult & { refusals: string[] }> {
  await load.stop();
  const expected = new Map<string, number>();
  for (const entry of load.accepted) expected.set(entry.userId, (expected.get(entry.userId) ?? 0) + 1);
  const shownIds = (client: ChaosClient) => new Set(client.shown.map((event) => event.id)).size;
  // Bounded drain: what has not arrived by then, the checker reports as missing (no throw here).
  await waitFor(() => clients.every((client) => shownIds(client) >= (expected.get(client.userId) ?? 0)), {
    timeoutMs: options.drainMs ?? 30_000,
    intervalMs: 50,
  }).catch(() => undefined);
  const result = check({
    scenario: options.scenario,
    accepted: load.accepted,
    shown: new Map(clients.map((client) => [client.userId, client.shown])),
    load: load.counts,
    unavailableAt: load.unavailableAt,
    inFlightAt: load.inFlightAt,
    faultEndAt: options.faultEndAt,
  });
  return { ...result, refusals: load.refusals };
}

/** The scenario's own timeline (how long load runs, how long a fault lasts): not a wait for a result. */
export function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The local TCP ports of process `pid`'s sockets (Linux: its /proc fds matched with /proc/net/tcp). */
function localPorts(pid: number): Set<number> {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const inode = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1];
      if (inode) inodes.add(inode);
    } catch {
      // closed meanwhile
    }
  }
  const ports = new Set<number>();
  for (const table of [`/proc/${pid}/net/tcp`, `/proc/${pid}/net/tcp6`]) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const columns = line.trim().split(/\s+/);
      const port = columns[1]?.split(':').at(-1);
      if (port && columns[9] && inodes.has(columns[9])) ports.add(Number.parseInt(port, 16));
    }
  }
  return ports;
}
