// Herald on a local Redis Cluster of 3 masters against the same pipeline on one redis-server, in the
// same run: does the Redis work spread over the masters, and does a notification cost Redis as much on
// the Cluster as on one node? Each target runs its own gateway, worker and two realtime instances (OS
// processes), `BENCH_USERS` connected users over `BENCH_TENANTS` tenants; open-loop load at
// `BENCH_RATE` for `BENCH_SECONDS` per round, rounds alternating between the targets. Redis CPU is each
// node's `INFO cpu` (used_cpu_sys + used_cpu_user), work done, which does not move with the machine's
// speed: µs per notification, per master, and each master's share against the mean.
//
// The Cluster runs `HERALD_QUEUE_PARTITIONS=BENCH_PARTITIONS` (default 3: one per master) and sharded
// pub/sub. A tenant's limiter buckets share its hash tag (one decision, one slot: one master per
// tenant), so the tenants are picked two per master by their tag's slot; with a handful of tenants
// picked at random the limiter's share (~17 µs of a notification) would follow the luck of the draw.
// A second Cluster runs the same with the envelope window times the partitions (60 ms for 3), so that
// each partition's envelopes gather what one node's gather at the default window: the Cluster's cost at
// one node's envelope fill, against the price of a longer wait before a send goes.
//
// Usage: npx pnpm@12.4.2 bench:cluster   (builds first)
// Env:   BENCH_RATE (1000), BENCH_SECONDS (10), BENCH_USERS (300), BENCH_ROUNDS (2), BENCH_PARTITIONS (3),
//        BENCH_BASELINE (a built checkout of an older commit: its pipeline on a Cluster of its own, in the
//        same rounds), BENCH_WRITE_README=0 (print only).
import { Agent } from 'node:http';
import { cpus, loadavg } from 'node:os';
import { queuePartitions } from '@herald/config';
import { ApiKeyStore } from '@herald/gateway/operator';
import { type RedisServerHandle, startRedisCluster, startRedisServer, waitFor } from '@herald/testing';
import calculateSlot from 'cluster-key-slot';
import { Cluster, Redis } from 'ioredis';
import type { Socket } from 'socket.io-client';
import { openLoop, type Pipeline, postNotify, startPipeline } from '../delivery/pipeline.js';
import {
  addCommandstats,
  type CommandStat,
  commandstats,
  commandstatsTable,
  median,
  redisCpuMicros,
} from '../redis-stats.js';
import { commitOf, writeReport } from '../report.js';
import { writeChart } from '../svg.js';

const RATE = Number(process.env.BENCH_RATE ?? 1000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const USERS = Number(process.env.BENCH_USERS ?? 300);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const PARTITIONS = Number(process.env.BENCH_PARTITIONS ?? 3);
const BASELINE = process.env.BENCH_BASELINE;
const MASTERS = 3;
/** The window of the last target's gateway: the default (20 ms) times the partitions. */
const FILLED_WINDOW_MS = 20 * PARTITIONS;
const SECRET = 'bench-secret-0123456789abcdef0123456789';
const KEY_PREFIX = 'herald:';

interface Target {
  label: string;
  /** Notifications per second it is offered. */
  rate: number;
  pipeline: Pipeline;
  /** The Redis nodes whose CPU is counted (the masters; the one server). */
  nodes: RedisServerHandle[];
  admins: Redis[];
  /** API key per tenant, and each user's tenant. */
  keys: string[];
  received: number;
  /** Per round: µs of Redis CPU per notification, per node. */
  rounds: number[][];
  /** Per round: the same less what each node spends idle (its background work) over the round's time. */
  net: number[][];
  /** Each node's Redis CPU with the pipeline up and no notification sent, µs per second. */
  idle: number[];
  accepted: number;
  /** INFO commandstats of every node, summed over the measured rounds. */
  commandstats: Map<string, CommandStat>;
}

/** Tenant ids, `perMaster` on each of the default slot ranges of `masters` masters (by their tag's slot). */
function tenantsSpread(masters: number, perMaster: number): string[] {
  const chosen: string[][] = Array.from({ length: masters }, () => []);
  for (let n = 0; chosen.some((list) => list.length < perMaster); n++) {
    const tenant = `tenant-${n}`;
    const master = Math.min(masters - 1, Math.floor((calculateSlot(tenant) * masters) / 16_384));
    const list = chosen[master];
    if (list && list.length < perMaster) list.push(tenant);
  }
  return chosen.flat();
}

async function main(): Promise<void> {
  const started = Date.now();
  const tenants = tenantsSpread(MASTERS, 2);
  const env = {
    HERALD_API_KEYS: 'none',
    HERALD_JWT_SECRET: SECRET,
    HERALD_KEY_PREFIX: KEY_PREFIX,
    HERALD_PUBSUB_KEY: 'bench-pubsub',
    // Costs of delivery, not of refusals: limits far above the offered load (each decision still runs).
    HERALD_RATE_LIMIT_PER_SECOND: '100000',
    HERALD_RATE_LIMIT_BURST: '100000',
    HERALD_SENDER_RATE_LIMIT_PER_SECOND: '1000000',
    HERALD_SENDER_RATE_LIMIT_BURST: '1000000',
    HERALD_MAX_CONNECTIONS_PER_USER: '100',
  };
  const targets: Target[] = [];
  const sockets: Socket[] = [];
  const disposers: (() => Promise<unknown>)[] = [];
  try {
    const single = await startRedisServer({ args: ['--appendonly', 'no'] });
    disposers.push(() => single.dispose());
    const cluster = await startRedisCluster({ masters: MASTERS, replicas: 0 });
    disposers.push(() => cluster.dispose());
    const masters = cluster.servers.slice(0, MASTERS);
    const clusterEnv = {
      HERALD_REDIS_CLUSTER_NODES: cluster.nodesEnv,
      HERALD_PUBSUB_MODE: 'sharded',
      HERALD_QUEUE_PARTITIONS: String(PARTITIONS),
    };
    const partitioned = await startRedisServer({ args: ['--appendonly', 'no'] });
    disposers.push(() => partitioned.dispose());
    const slower = await startRedisServer({ args: ['--appendonly', 'no'] });
    disposers.push(() => slower.dispose());
    const share = Math.round(RATE / PARTITIONS);
    // A second Cluster, whose gateway lingers the window times the partitions (each partition's envelope
    // then gathers what one node's does at the default window): what the Cluster costs at one node's
    // envelope fill.
    const filledCluster = await startRedisCluster({ masters: MASTERS, replicas: 0 });
    disposers.push(() => filledCluster.dispose());
    // The same code five ways: today's one node; the Cluster; one node with the Cluster's partitions
    // (what partitioning costs alone); one node with one partition at the rate each of the Cluster's
    // partitions gets (what an envelope gathers depends on its queue's rate, not the deployment's); the
    // Cluster with its envelopes as full as one node's.
    // BENCH_BASELINE: the older build's pipeline on a Cluster of its own, beside the others.
    const baseCluster =
      BASELINE === undefined ? undefined : await startRedisCluster({ masters: MASTERS, replicas: 0 });
    if (baseCluster) disposers.push(() => baseCluster.dispose());
    for (const [label, nodes, extra, rate, clusterNodes, root] of [
      ['one redis-server, 1 partition', [single], {}, RATE, undefined],
      [`Cluster, ${MASTERS} masters, ${PARTITIONS} partitions`, masters, clusterEnv, RATE, cluster.nodes],
      [
        `one redis-server, ${PARTITIONS} partitions`,
        [partitioned],
        { HERALD_QUEUE_PARTITIONS: String(PARTITIONS) },
        RATE,
        undefined,
      ],
      [`one redis-server, 1 partition, ${share}/s`, [slower], {}, share, undefined],
      [
        `Cluster, ${MASTERS} masters, ${PARTITIONS} partitions, HERALD_ENVELOPE_WINDOW_MS=${FILLED_WINDOW_MS}`,
        filledCluster.servers.slice(0, MASTERS),
        {
          ...clusterEnv,
          HERALD_REDIS_CLUSTER_NODES: filledCluster.nodesEnv,
          HERALD_ENVELOPE_WINDOW_MS: String(FILLED_WINDOW_MS),
        },
        RATE,
        filledCluster.nodes,
      ],
      ...(baseCluster === undefined || BASELINE === undefined
        ? []
        : [
            [
              `Cluster, ${MASTERS} masters, ${PARTITIONS} partitions, baseline ${commitOf(BASELINE)}`,
              baseCluster.servers.slice(0, MASTERS),
              { ...clusterEnv, HERALD_REDIS_CLUSTER_NODES: baseCluster.nodesEnv },
              RATE,
              baseCluster.nodes,
              BASELINE,
            ] as const,
          ]),
    ] as const) {
      const first = nodes[0] as RedisServerHandle;
      const client =
        clusterNodes !== undefined ? new Cluster(clusterNodes, { redisOptions: {} }) : new Redis(first.url);
      const store = new ApiKeyStore({ redis: client, keyPrefix: KEY_PREFIX, cacheMs: 0, envKeys: [] });
      const keys: string[] = [];
      for (const tenantId of tenants) keys.push((await store.create({ name: 'bench', tenantId })).key);
      client.disconnect();
      const pipeline = await startPipeline({
        redis: first,
        env: { ...env, ...extra },
        secret: SECRET,
        ...(root === undefined ? {} : { root }),
      });
      disposers.push(() => pipeline.stop());
      const target: Target = {
        label,
        rate,
        pipeline,
        nodes: [...nodes],
        admins: nodes.map((node) => new Redis(node.url)),
        keys,
        received: 0,
        rounds: [],
        net: [],
        idle: [],
        accepted: 0,
        commandstats: new Map(),
      };
      targets.push(target);
      for (let i = 0; i < USERS; i++) {
        const socket = await pipeline.connect(
          pipeline.realtimeUrls[i % 2] ?? '',
          `user-${i}`,
          tenants[i % tenants.length],
        );
        socket.on('notification', () => target.received++);
        sockets.push(socket);
      }
    }
    const agent = new Agent({ keepAlive: true, maxSockets: 64 });
    for (const target of targets) await round(target, agent, 2);
    // Background work (cron, cluster bus, the apps' polling and heartbeats), 5 s with nothing sent.
    for (const target of targets) {
      const before = await Promise.all(target.admins.map(redisCpuMicros));
      const start = performance.now();
      await new Promise((resolve) => setTimeout(resolve, 5000));
      const seconds = (performance.now() - start) / 1000;
      const after = await Promise.all(target.admins.map(redisCpuMicros));
      target.idle = after.map((value, i) => (value - (before[i] ?? 0)) / seconds);
    }
    for (let n = 0; n < ROUNDS; n++) {
      for (const target of n % 2 === 0 ? targets : [...targets].reverse()) {
        target.rounds.push(await round(target, agent, SECONDS, true));
      }
    }
    const where = await partitionMasters(cluster.nodes, masters);
    report(targets, tenants, where, Date.now() - started);
    for (const target of targets) for (const admin of target.admins) admin.disconnect();
  } finally {
    for (const socket of sockets) socket.disconnect();
    for (const dispose of disposers.reverse()) await dispose().catch(() => undefined);
  }
}

/**
 * One round: the target's rate for `seconds`, user i of tenant i mod tenants, then waits until every notification
 * accepted has reached its socket; answers each node's Redis µs per notification.
 */
async function round(target: Target, agent: Agent, seconds: number, measured = false): Promise<number[]> {
  const before = await Promise.all(target.admins.map(redisCpuMicros));
  const statsBefore = await Promise.all(target.admins.map(commandstats));
  const roundStart = performance.now();
  const receivedBefore = target.received;
  const total = target.rate * seconds;
  const accepted = await openLoop(target.rate, seconds, (n) => {
    const user = n % USERS;
    const key = target.keys[user % target.keys.length] ?? '';
    return postNotify(agent, target.pipeline.gatewayUrl, key, `user-${user}`, { t: Date.now() });
  });
  await waitFor(() => target.received - receivedBefore >= accepted, { timeoutMs: 120_000, intervalMs: 50 });
  const after = await Promise.all(target.admins.map(redisCpuMicros));
  if (measured) {
    const statsAfter = await Promise.all(target.admins.map(commandstats));
    for (const [i, stats] of statsAfter.entries())
      addCommandstats(target.commandstats, statsBefore[i] ?? new Map(), stats);
  }
  const wall = (performance.now() - roundStart) / 1000;
  if (measured) target.accepted += accepted;
  if (accepted < total) throw new Error(`${target.label}: ${total - accepted} of ${total} not accepted`);
  const raw = after.map((value, i) => value - (before[i] ?? 0));
  if (measured) target.net.push(raw.map((value, i) => (value - (target.idle[i] ?? 0) * wall) / accepted));
  return raw.map((value) => value / Math.max(1, accepted));
}

/** Which master (index among `masters`) holds each queue partition's slot. */
async function partitionMasters(
  nodes: { host: string; port: number }[],
  masters: RedisServerHandle[],
): Promise<number[]> {
  const client = new Cluster(nodes);
  try {
    await client.ping();
    return queuePartitions({ name: 'notifications', prefix: '{herald}', partitions: PARTITIONS }).map(
      ({ prefix }) => {
        const owner = client.slots[calculateSlot(`${prefix}:notifications:id`)]?.[0] ?? '';
        return masters.findIndex((master) => owner.endsWith(`:${master.port}`));
      },
    );
  } finally {
    client.disconnect();
  }
}

function report(targets: Target[], tenants: string[], where: number[], ms: number): void {
  const [single, cluster, partitioned, slower, filled, baseline] = targets;
  if (!single || !cluster || !partitioned || !slower || !filled) return;
  const perNode = (target: Target, rounds: number[][]) =>
    target.nodes.map((_node, i) => median(rounds.map((round) => round[i] ?? 0)));
  const sum = (values: number[]) => values.reduce((total, value) => total + value, 0);
  const masters = perNode(cluster, cluster.rounds);
  const net = perNode(cluster, cluster.net);
  const mean = sum(masters) / Math.max(1, masters.length);
  const deviations = masters.map((value) => (value - mean) / mean);
  const worst = Math.max(...deviations.map(Math.abs));
  const signed = (value: number) => `${value >= 0 ? '+' : ''}${(value * 100).toFixed(1)} %`;
  const row = (label: string, target: Target) =>
    `| ${label} | ${sum(perNode(target, target.rounds)).toFixed(1)} | ${sum(perNode(target, target.net)).toFixed(1)} | ${sum(target.idle).toFixed(0)} | |`;
  const clusterTotal = sum(masters);
  const singleTotal = sum(perNode(single, single.rounds));
  const lines = [
    `Machine: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, load ${loadavg()[0]?.toFixed(2)} at the end; Node ${process.version}. ` +
      `${RATE}/s (but the ${Math.round(RATE / PARTITIONS)}/s row) for ${SECONDS} s per round, ${ROUNDS} measured rounds per target (alternating), ` +
      `${USERS} connected users over ${tenants.length} tenants (two per master by their tag's slot: a tenant's limiter decisions are on one master); ` +
      `${targets.reduce((total, target) => total + target.accepted, 0)} notifications accepted and shown in the measured rounds, nothing lost. ` +
      `Medians of the rounds; ${Math.round(ms / 1000)} s in all. "Less idle": less what the node spends with the pipeline up and nothing sent (cron, cluster bus, the apps' polling), over the round's time.`,
    '',
    '| Redis CPU per notification | µs | µs less idle | idle µs/s | share of the mean (queue partitions held) |',
    '| --- | --: | --: | --: | --: |',
    ...masters.map(
      (value, i) =>
        `| Cluster master ${i + 1} | ${value.toFixed(1)} | ${(net[i] ?? 0).toFixed(1)} | ${(cluster.idle[i] ?? 0).toFixed(0)} | ${signed(deviations[i] ?? 0)} (${where.filter((master) => master === i).length}) |`,
    ),
    `| **Cluster, all ${masters.length} masters** | **${clusterTotal.toFixed(1)}** | **${sum(net).toFixed(1)}** | ${sum(cluster.idle).toFixed(0)} | widest ${(worst * 100).toFixed(1)} % (goal ±15 %) |`,
    row(single.label, single),
    row(partitioned.label, partitioned),
    row(slower.label, slower),
    row(filled.label, filled),
    ...(baseline ? [row(baseline.label, baseline)] : []),
    '',
    `Per notification the Cluster costs Redis **${(clusterTotal / singleTotal).toFixed(2)}×** what one node does with one partition ` +
      `(${(clusterTotal / sum(perNode(partitioned, partitioned.rounds))).toFixed(2)}× one node with the same ${PARTITIONS} partitions, ` +
      `${(clusterTotal / sum(perNode(slower, slower.rounds))).toFixed(2)}× one node at the rate each partition gets). ` +
      `Each master carries ${(100 / masters.length).toFixed(0)} % of the work give or take ${(worst * 100).toFixed(0)} %; ` +
      `with the busiest master at 70 % of a core this Cluster carries ~${Math.round(0.7e6 / Math.max(...masters)).toLocaleString('en-US')} notifications/s ` +
      `(one node: ~${Math.round(0.7e6 / singleTotal).toLocaleString('en-US')}/s). ` +
      `With its envelopes as full as one node's (\`HERALD_ENVELOPE_WINDOW_MS=${FILLED_WINDOW_MS}\`: a send may wait that long), ` +
      `the Cluster costs ${(sum(perNode(filled, filled.rounds)) / singleTotal).toFixed(2)}× one node.` +
      (baseline
        ? ` The same Cluster with the ${baseline.label.replace(/^.*baseline /, '')} build, in the same rounds: ` +
          `${sum(perNode(baseline, baseline.rounds)).toFixed(1)} µs per notification; this build ` +
          `**${(clusterTotal / sum(perNode(baseline, baseline.rounds))).toFixed(2)}×** of it.`
        : ''),
    '',
    writeChart('cluster-spread', {
      title: `Redis CPU per notification at ${RATE}/s: each Cluster master, and one node`,
      unit: 'Redis CPU µs per notification of the deployment (median of the rounds)',
      series: ['Redis CPU'],
      groups: [
        ...masters.map((value, i) => ({ label: `Cluster master ${i + 1}`, values: [value] })),
        { label: `Cluster, all ${masters.length} masters`, values: [clusterTotal] },
        ...[single, partitioned, slower, filled, ...(baseline ? [baseline] : [])].map((target) => ({
          label: target.label,
          values: [sum(perNode(target, target.rounds))],
        })),
      ],
    }),
  ];
  const text = lines.join('\n');
  // INFO commandstats of each target: the terminal only (the report keeps the per-master figures).
  const commands = commandstatsTable(
    [single, slower, partitioned, cluster, filled, ...(baseline ? [baseline] : [])].map((target) => ({
      label: target.label,
      stats: target.commandstats,
      accepted: target.accepted,
    })),
    6,
  );
  process.stdout.write(`${text}\n\n${commands.join('\n')}\n`);
  writeReport('cluster', text);
}

await main();
