// What HERALD_REDIS_WAIT_REPLICAS=1 costs the gateway: POST /notify on a local 3-master, 3-replica
// Redis Cluster, one gateway with WAIT 0 (a 202 once the queue's master has the job) and one with WAIT 1
// (once a replica has it too), side by side in one run, in rounds that alternate their order, each
// gateway its own process, autocannon here. Prints req/s and latency per round and the median ratios.
//   BENCH_ROUNDS (4), BENCH_SECONDS (5), BENCH_CONNECTIONS (20)
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { freePort, startRedisCluster, waitFor } from '@herald/testing';
import autocannon from 'autocannon';

const require = createRequire(import.meta.url);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 20);
const API_KEY = 'bench-key-0123456789abcdef0123456789abcdef';

const cluster = await startRedisCluster({ masters: 3, replicas: 1 });
const children: ChildProcess[] = [];
const stop = async () => {
  for (const child of children) child.kill('SIGTERM');
  await cluster.dispose();
};
process.on('SIGINT', () => void stop().then(() => process.exit(130)));

async function gateway(waitReplicas: number): Promise<number> {
  const port = await freePort();
  const child = spawn(process.execPath, [require.resolve('@herald/gateway/server')], {
    env: {
      ...process.env,
      PORT: String(port),
      HERALD_LOG_LEVEL: 'warn',
      REDIS_URL: `redis://${cluster.nodesEnv.split(',')[0]}`,
      HERALD_REDIS_CLUSTER_NODES: cluster.nodesEnv,
      HERALD_PUBSUB_MODE: 'sharded',
      HERALD_REDIS_WAIT_REPLICAS: String(waitReplicas),
      HERALD_API_KEYS: API_KEY,
      HERALD_JWT_SECRET: 'bench-secret-0123456789abcdef0123456789',
      HERALD_QUEUE_NAME: `bench-wait-${randomUUID().slice(0, 8)}`,
      HERALD_SENDER_RATE_LIMIT_BURST: '1000000000',
      HERALD_SENDER_RATE_LIMIT_PER_SECOND: '1000000000',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.push(child);
  await waitFor(
    async () => {
      const response = await fetch(`http://127.0.0.1:${port}/healthz`);
      await response.arrayBuffer();
      return response.ok;
    },
    { timeoutMs: 60_000, intervalMs: 200, what: `gateway (WAIT ${waitReplicas}) to answer` },
  );
  return port;
}

async function run(port: number, seconds = SECONDS) {
  let n = 0;
  const result = await autocannon({
    url: `http://127.0.0.1:${port}/notify`,
    connections: CONNECTIONS,
    duration: seconds,
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
    requests: [
      {
        setupRequest: (request) => ({
          ...request,
          body: JSON.stringify({ userId: `user-${n++ % 10_000}`, payload: { title: 'Hello' } }),
        }),
      },
    ],
  });
  const accepted = result['2xx'];
  return {
    perSecond: accepted / seconds,
    p50: result.latency.p50,
    p99: result.latency.p99,
    other: result.non2xx + result.errors,
  };
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
};

try {
  const ports = { 0: await gateway(0), 1: await gateway(1) } as const;
  await run(ports[0], 2);
  await run(ports[1], 2);
  const rows: string[] = [];
  const ratios = { perSecond: [] as number[], p50: [] as number[], p99: [] as number[] };
  for (let round = 1; round <= ROUNDS; round++) {
    const order = round % 2 === 0 ? ([1, 0] as const) : ([0, 1] as const);
    const results: Record<number, Awaited<ReturnType<typeof run>>> = {};
    for (const wait of order) results[wait] = await run(ports[wait]);
    const [a, b] = [results[0], results[1]];
    if (!a || !b) continue;
    for (const [wait, r] of [
      [0, a],
      [1, b],
    ] as const)
      rows.push(`| ${round} | ${wait} | ${r.perSecond.toFixed(0)} | ${r.p50} | ${r.p99} | ${r.other} |`);
    ratios.perSecond.push(b.perSecond / a.perSecond);
    ratios.p50.push(b.p50 / a.p50);
    ratios.p99.push(b.p99 / a.p99);
  }
  process.stdout.write(
    [
      `POST /notify on a 3+3 Redis Cluster, ${CONNECTIONS} connections, ${SECONDS} s per run:`,
      '| round | HERALD_REDIS_WAIT_REPLICAS | 202/s | p50 ms | p99 ms | not 202 |',
      '| ---: | ---: | ---: | ---: | ---: | ---: |',
      ...rows,
      '',
      `WAIT 1 ÷ WAIT 0 (median of rounds): throughput ${median(ratios.perSecond).toFixed(2)}×, p50 ${median(ratios.p50).toFixed(2)}×, p99 ${median(ratios.p99).toFixed(2)}×`,
      '',
    ].join('\n'),
  );
} finally {
  await stop();
}
