// POST /notify throughput and latency, side by side in one run (bench/README.md has the figures):
//   bare      a bare Fastify route answering 202 (the peer)
//   limiter   the same route behind Herald's limiter plugin (sender + recipient, one Redis call)
//   gateway   Herald's full gateway: auth + limiter + durable BullMQ enqueue
//   denied    Herald's full gateway under a flood from one API key that is over its limit (the issue's
//             "flood from one denied key": refused before its body is read, no Redis call), and under a
//             flood to one recipient that is being denied (its id is in the body, so the body is parsed
//             and validated first; still no Redis call)
//   baseline  with BENCH_BASELINE=<a built checkout of an older commit>: that commit's gateway, under the
//             same three loads, in the same rounds (the "no worse than before" check of a change)
// Each server is its own process; autocannon runs here. Rounds interleave the contenders (in an order
// rotated each round) so that a noisy neighbour hurts all of them alike; the ratios are medians of
// per-round ratios. Beside req/s, each round counts the CPU its server spent (the process and any it
// started, from /proc) and Redis's (INFO cpu), per request answered: what the load generator, which
// shares the 2 cores, does not move. Ratios of it say how many more requests a core of each carries.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, waitFor } from '@herald/testing';
import autocannon from 'autocannon';
import { Redis } from 'ioredis';
import { cpuTicks } from '../delivery/pipeline.js';
import { redisCpuMicros } from '../redis-stats.js';
import { commitOf, writeReport } from '../report.js';
import { writeChart } from '../svg.js';

const require = createRequire(import.meta.url);
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const WARMUP_SECONDS = 2;
const runId = randomUUID().slice(0, 8);
const queueName = `bench-${runId}`;
const tsx = require.resolve('tsx/cli');
/** A built checkout of an older commit whose gateway runs beside this one (`BENCH_BASELINE`). */
const BASELINE = process.env.BENCH_BASELINE;

interface Server {
  name: string;
  port: number;
  child: ChildProcess;
}

/**
 * `pid` and every process below it (a server run with tsx is a child of tsx's own process), read from
 * /proc; only `pid` where there is no /proc.
 */
function processTree(pid: number): number[] {
  const parents = new Map<number, number[]>();
  try {
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const parent = Number(readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]?.split(' ')[1]);
        parents.set(parent, [...(parents.get(parent) ?? []), Number(entry)]);
      } catch {
        // gone meanwhile
      }
    }
  } catch {
    return [pid];
  }
  const tree: number[] = [];
  for (const queue = [pid]; queue.length > 0; ) {
    const next = queue.pop() as number;
    tree.push(next);
    queue.push(...(parents.get(next) ?? []));
  }
  return tree;
}

const children: ChildProcess[] = [];
process.on('exit', () => {
  for (const child of children) child.kill('SIGTERM');
});

async function start(name: string, args: string[], env: Record<string, string>): Promise<Server> {
  const port = await freePort();
  const child = spawn(process.execPath, args, {
    // The gateway logs at `warn` here, as a busy production gateway would: two info lines per request
    // would measure pino, not Herald.
    env: { ...process.env, PORT: String(port), HERALD_LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.push(child);
  let exited = false;
  child.once('exit', () => {
    exited = true;
  });
  await waitFor(
    async () => {
      if (exited) throw new Error(`${name} exited`);
      const response = await fetch(`http://127.0.0.1:${port}/notify`, { method: 'OPTIONS' });
      await response.arrayBuffer();
      return true;
    },
    { timeoutMs: 30_000, intervalMs: 100, what: `${name} to answer` },
  );
  return { name, port, child };
}

function load(
  port: number,
  userId: () => string,
  headers: Record<string, string>,
  seconds = SECONDS,
  connections = CONNECTIONS,
) {
  return autocannon({
    url: `http://127.0.0.1:${port}/notify`,
    connections,
    duration: seconds,
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    requests: [
      {
        setupRequest: (request) => ({
          ...request,
          body: JSON.stringify({ userId: userId(), payload: { title: 'Hello', body: 'from the benchmark' } }),
        }),
      },
    ],
  });
}

// 32+ bytes each, as the gateway requires outside development mode.
const API_KEY = 'bench-key-0123456789abcdef0123456789abcdef';
const env = {
  REDIS_URL,
  HERALD_API_KEYS: API_KEY,
  HERALD_JWT_SECRET: 'bench-secret-0123456789abcdef0123456789',
  HERALD_QUEUE_NAME: queueName,
  HERALD_RATE_LIMIT_PREFIX: `bench-${runId}:`,
  HERALD_KEY_PREFIX: `bench-${runId}:`,
  HERALD_SENDER_RATE_LIMIT_BURST: '1000000000',
  HERALD_SENDER_RATE_LIMIT_PER_SECOND: '1000000000',
};
const here = (file: string) => fileURLToPath(new URL(file, import.meta.url));
// The operator CLI's `herald` bin (@herald/cli).
const heraldBin = join(dirname(require.resolve('@herald/cli/package.json')), 'dist', 'bin.js');
const servers = {
  bare: await start('bare', [tsx, here('./bare-server.ts')], env),
  limiter: await start('limiter', [tsx, here('./limiter-server.ts')], env),
  gateway: await start('gateway', [require.resolve('@herald/gateway/server')], env),
  peerGet: await start('peer-get', [tsx, here('./peer-server.ts')], { ...env, PEER: 'get' }),
  peerBullmq: await start('peer-bullmq', [tsx, here('./peer-server.ts')], { ...env, PEER: 'bullmq' }),
  peerRateLimit: await start('peer-rate-limit-bullmq', [tsx, here('./peer-server.ts')], {
    ...env,
    PEER: 'rate-limit-bullmq',
  }),
};
const auth = { authorization: `Bearer ${API_KEY}` };
// A stored API key with a sender limit of 1 notification, then 1 per 1,000 s: created with the
// operator CLI, as a user would; its first request passes, every later one is denied.
/**
 * Creates, with `bin` (a `herald` CLI), a stored API key of tenant `bench` with a sender limit of 1
 * notification, then 1 per 1,000 s: its first request passes, every later one is denied.
 */
function createFloodKey(bin: string, keyEnv: Record<string, string>): string {
  const created = execFileSync(
    process.execPath,
    [
      bin,
      'keys',
      'create',
      '--name',
      'flood',
      '--tenant',
      'bench',
      '--sender-burst',
      '1',
      '--sender-rate',
      '0.001',
    ],
    { env: { ...process.env, ...keyEnv }, encoding: 'utf8' },
  );
  const key = /key:\s+(\S+)/.exec(created)?.[1];
  if (key === undefined) throw new Error(`could not create the flood's API key: ${created}`);
  return key;
}
// Created with the operator CLI, as a user would.
const floodKey = createFloodKey(heraldBin, env);
let n = 0;
const fresh = () => `u${runId}-${n++}`;
/** The baseline contender of each Herald contender it is compared with (`BENCH_BASELINE`). */
const BASELINE_OF: Record<string, string> = {
  'Herald full gateway': 'baseline: full gateway',
  'Herald gateway, denied flood (one API key)': 'baseline: denied flood (one API key)',
  'Herald gateway, denied flood (one recipient)': 'baseline: denied flood (one recipient)',
};
// The references of the full gateway: (a) the Redis work of a durable enqueue and nothing else; (b) the
// stack a user would wire by hand. Herald's gateway also checks two policies, idempotency and durability.
const REFERENCE_A = 'reference (a): bare + one BullMQ queue.add';
/**
 * The full gateway and (a) and (b) again with 4× the requests in flight: with few in flight the
 * gateway waits on its two round trips (the limiter's decision, then the envelope's add) where (a)
 * waits on one; with many, its envelopes carry more and the references' one add per request costs more.
 */
const HIGH = CONNECTIONS * 4;
const FULL_HIGH = `Herald full gateway, ${HIGH} connections`;
const REFERENCE_A_HIGH = `reference (a), ${HIGH} connections`;
const REFERENCE_B_HIGH = `reference (b), ${HIGH} connections`;
const REFERENCE_B = 'reference (b): Fastify + @fastify/rate-limit (Redis store) + queue.add';
interface Contender {
  name: string;
  port: number;
  userId: () => string;
  headers: Record<string, string>;
  /** Requests in flight, when not CONNECTIONS. */
  connections?: number;
}
const contenders: Contender[] = [
  { name: 'bare Fastify (peer)', port: servers.bare.port, userId: fresh, headers: {} },
  { name: 'Herald limiter only', port: servers.limiter.port, userId: fresh, headers: auth },
  { name: 'Herald full gateway', port: servers.gateway.port, userId: fresh, headers: auth },
  {
    name: 'reference: bare + one Redis GET (auto-pipelined)',
    port: servers.peerGet.port,
    userId: fresh,
    headers: {},
  },
  {
    name: REFERENCE_A,
    port: servers.peerBullmq.port,
    userId: fresh,
    headers: {},
  },
  {
    name: REFERENCE_B,
    port: servers.peerRateLimit.port,
    userId: fresh,
    headers: auth,
  },
  {
    name: 'Herald gateway, denied flood (one API key)',
    port: servers.gateway.port,
    userId: fresh,
    headers: { authorization: `Bearer ${floodKey}` },
  },
  { name: FULL_HIGH, port: servers.gateway.port, userId: fresh, headers: auth, connections: HIGH },
  { name: REFERENCE_A_HIGH, port: servers.peerBullmq.port, userId: fresh, headers: {}, connections: HIGH },
  {
    name: REFERENCE_B_HIGH,
    port: servers.peerRateLimit.port,
    userId: fresh,
    headers: auth,
    connections: HIGH,
  },
  {
    name: 'Herald gateway, denied flood (one recipient)',
    port: servers.gateway.port,
    userId: () => `hot-${runId}`,
    headers: auth,
  },
];
/** Servers started beside `servers` (the baseline's gateway). */
const extraServers: Server[] = [];
if (BASELINE !== undefined) {
  // Its own prefixes and queue: the two gateways share nothing but Redis.
  const baselineEnv = {
    ...env,
    HERALD_QUEUE_NAME: `${queueName}-base`,
    HERALD_RATE_LIMIT_PREFIX: `bench-${runId}-base:`,
    HERALD_KEY_PREFIX: `bench-${runId}-base:`,
  };
  const baseline = await start('baseline', [join(BASELINE, 'apps/gateway/dist/server.js')], baselineEnv);
  extraServers.push(baseline);
  // Its own CLI: @herald/cli where the commit has it, else the older scripts/herald.mjs.
  const cli = [join(BASELINE, 'apps/cli/dist/bin.js'), join(BASELINE, 'scripts/herald.mjs')].find((file) =>
    existsSync(file),
  );
  if (cli === undefined)
    throw new Error(`${BASELINE} has no herald CLI (apps/cli/dist/bin.js or scripts/herald.mjs)`);
  const baselineFlood = createFloodKey(cli, baselineEnv);
  contenders.push(
    { name: BASELINE_OF['Herald full gateway'], port: baseline.port, userId: fresh, headers: auth },
    {
      name: BASELINE_OF['Herald gateway, denied flood (one API key)'],
      port: baseline.port,
      userId: fresh,
      headers: { authorization: `Bearer ${baselineFlood}` },
    },
    {
      name: BASELINE_OF['Herald gateway, denied flood (one recipient)'],
      port: baseline.port,
      userId: () => `hot-${runId}`,
      headers: auth,
    },
  );
}

// Warm-up: every contender once, unrecorded, so that no round measures the JIT compiling a code path.
for (const contender of contenders)
  await load(contender.port, contender.userId, contender.headers, WARMUP_SECONDS, contender.connections);

type Sample = {
  rps: number;
  /** CPU µs of the server's processes and of Redis per request answered. */
  cpuPerRequest: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  statuses: Record<string, number>;
};
const samples = new Map<string, Sample[]>(contenders.map((c) => [c.name, []]));
/**
 * Contenders compared with each other run back to back in every round, in an order rotated each round:
 * the full gateway and its references (a) and (b), at each number of connections. Only the ratios of
 * neighbours in time are safe on a shared machine whose speed drifts by a third within minutes.
 */
const BLOCKS: readonly (readonly string[])[] = [
  ['Herald full gateway', REFERENCE_A, REFERENCE_B],
  [FULL_HIGH, REFERENCE_A_HIGH, REFERENCE_B_HIGH],
];
/**
 * The order of one round: each round starts one contender later (as bench/limiter does), so no contender
 * always runs right after the same neighbour or always first; a block of {@link BLOCKS} counts as one
 * and rotates within. A baseline contender runs right next to its Herald counterpart (before it in even
 * rounds, after it in odd ones): the two are compared, so they should share the machine's state of the
 * moment.
 */
function roundOrder(round: number): Contender[] {
  const heralds = contenders.filter((contender) => !Object.values(BASELINE_OF).includes(contender.name));
  const units: Contender[][] = [];
  for (const contender of heralds) {
    const block = BLOCKS.find((names) => names.includes(contender.name));
    if (block === undefined) units.push([contender]);
    else if (block[0] === contender.name) {
      const members = heralds.filter((candidate) => block.includes(candidate.name));
      units.push(members.map((_, k) => members[(k + round - 1) % members.length] as Contender));
    }
  }
  const rotated = units.flatMap((_, k) => units[(k + round - 1) % units.length] as Contender[]);
  return rotated.flatMap((contender) => {
    const baseline = contenders.find((c) => c.name === BASELINE_OF[contender.name]);
    if (baseline === undefined) return [contender];
    return round % 2 === 0 ? [baseline, contender] : [contender, baseline];
  });
}

// The processes of each server, by port (found once: they run for the whole benchmark).
const serverPids = new Map<number, number[]>();
for (const child of children) {
  const server = [...Object.values(servers), ...extraServers].find((candidate) => candidate.child === child);
  if (server !== undefined && child.pid !== undefined) serverPids.set(server.port, processTree(child.pid));
}
const admin = new Redis(REDIS_URL);

for (let round = 1; round <= ROUNDS; round++) {
  for (const contender of roundOrder(round)) {
    const pids = serverPids.get(contender.port) ?? [];
    const ticksBefore = cpuTicks(pids);
    const redisBefore = await redisCpuMicros(admin);
    const result = await load(
      contender.port,
      contender.userId,
      contender.headers,
      SECONDS,
      contender.connections,
    );
    const redisMicros = (await redisCpuMicros(admin)) - redisBefore;
    const serverMicros = (cpuTicks(pids) - ticksBefore) * 10_000;
    const statuses: Record<string, number> = {};
    for (const [code, count] of Object.entries(result.statusCodeStats ?? {})) statuses[code] = count.count;
    const answered = Object.values(statuses).reduce((sum, count) => sum + count, 0);
    samples.get(contender.name)?.push({
      rps: result.requests.average,
      cpuPerRequest: (serverMicros + redisMicros) / answered,
      p50: result.latency.p50,
      p90: result.latency.p90,
      p99: result.latency.p99,
      p999: result.latency.p99_9,
      statuses,
    });
    process.stderr.write(
      `round ${round} ${contender.name}: ${Math.round(result.requests.average)} req/s, p50 ${result.latency.p50} ms, p99 ${result.latency.p99} ms, CPU ${Math.round(serverMicros / answered)} + Redis ${Math.round(redisMicros / answered)} µs per request, ${JSON.stringify(statuses)}\n`,
    );
  }
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
};
const bare = samples.get(contenders[0]?.name ?? '') ?? [];
const targets: Record<string, string> = {
  'Herald limiter only': '≥ 0.8×',
  'Herald full gateway': '≥ 1.0× (a), ≥ 1.5× (b)',
  'Herald gateway, denied flood (one API key)': '≥ 0.9×',
  [FULL_HIGH]: '≥ 1.0× (a), ≥ 1.5× (b)',
};
// Herald against the reference that does the same Redis work and nothing else.
const references: Record<string, string> = {
  'Herald limiter only': 'reference: bare + one Redis GET (auto-pipelined)',
  'Herald full gateway': REFERENCE_A,
  [FULL_HIGH]: REFERENCE_A_HIGH,
};
const handWired: Record<string, string> = {
  'Herald full gateway': REFERENCE_B,
  [FULL_HIGH]: REFERENCE_B_HIGH,
};
/**
 * `name` against its counterpart in `counterparts` (if any): the median of per-round ratios, req/s by
 * default; `ratio` gets the two samples of a round (for CPU: theirs over ours, more than 1× when `name`
 * carries more requests per core).
 */
function versus(
  name: string,
  counterparts: Record<string, string>,
  ratio = (own: Sample, theirs: Sample | undefined) => own.rps / (theirs?.rps ?? Number.NaN),
): string {
  const counterpart = counterparts[name];
  if (counterpart === undefined) return '';
  const theirs = samples.get(counterpart) ?? [];
  return `${median((samples.get(name) ?? []).map((sample, i) => ratio(sample, theirs[i]))).toFixed(2)}×`;
}
const cpuRatio = (own: Sample, theirs: Sample | undefined) =>
  (theirs?.cpuPerRequest ?? Number.NaN) / own.cpuPerRequest;
const rows = contenders.map((contender) => {
  const own = samples.get(contender.name) ?? [];
  const ratios = own.map((sample, i) => sample.rps / (bare[i]?.rps ?? Number.NaN));
  return {
    contender: contender.name,
    'req/s (median)': Math.round(median(own.map((s) => s.rps))),
    'p50 ms': median(own.map((s) => s.p50)),
    'p99 ms': median(own.map((s) => s.p99)),
    'CPU µs per request (server + Redis)': Math.round(median(own.map((s) => s.cpuPerRequest))),
    // Bare Fastify ran with CONNECTIONS in flight: no ratio for a contender with more.
    'vs bare (median of rounds)': contender.connections === undefined ? `${median(ratios).toFixed(2)}×` : '',
    target: targets[contender.name] ?? '',
    'vs its reference': versus(contender.name, references),
    'vs (b)': versus(contender.name, handWired),
    'CPU per request: (a) / this, (b) / this':
      handWired[contender.name] === undefined
        ? ''
        : `${versus(contender.name, references, cpuRatio)}, ${versus(contender.name, handWired, cpuRatio)}`,
    ...(BASELINE === undefined ? {} : { 'vs baseline': versus(contender.name, BASELINE_OF) }),
  };
});
console.table(rows);
const method = `${ROUNDS} rounds × ${SECONDS} s × ${CONNECTIONS} connections per contender; Redis ${REDIS_URL}${BASELINE === undefined ? '' : `; baseline: the gateway of ${commitOf(BASELINE)}`}`;
console.log(method);
const columns = Object.keys(rows[0] ?? {});
// The full gateway against the references it is held to, (a) and (b), and the baseline's gateway if
// any: req/s round by round (the table has only the medians, and a ratio is only as good as its rounds'
// agreement), then the latency distribution beyond the table's p50 and p99.
const compared = [
  'Herald full gateway',
  REFERENCE_A,
  REFERENCE_B,
  ...(BASELINE === undefined ? [] : [BASELINE_OF['Herald full gateway'] as string]),
];
const series = [
  'Herald full gateway',
  '(a) bare Fastify + one BullMQ add',
  '(b) Fastify + @fastify/rate-limit (Redis store) + BullMQ add',
  ...(BASELINE === undefined ? [] : [`baseline ${commitOf(BASELINE)}: full gateway`]),
];
const of = (name: string) => samples.get(name) ?? [];
const throughputChart = writeChart('gateway-throughput', {
  title: 'POST /notify req/s: the full gateway and the references (a) and (b), round by round',
  unit: `requests/s (autocannon, ${CONNECTIONS} connections, ${SECONDS} s per round)`,
  series,
  groups: [
    ...Array.from({ length: ROUNDS }, (_, round) => ({
      label: `round ${round + 1}`,
      values: compared.map((name) => of(name)[round]?.rps),
    })),
    {
      label: `median of ${ROUNDS} rounds`,
      values: compared.map((name) => median(of(name).map((s) => s.rps))),
    },
  ],
});
const percentiles = [
  ['p50', 'p50'],
  ['p90', 'p90'],
  ['p99', 'p99'],
  ['p99.9', 'p999'],
] as const;
const latencyChart = writeChart('gateway-latency', {
  title: 'POST /notify latency: the full gateway and the references (a) and (b)',
  unit: `ms (autocannon, ${CONNECTIONS} connections; median of ${ROUNDS} rounds)`,
  series,
  groups: percentiles.map(([label, key]) => ({
    label,
    values: compared.map((name) => median(of(name).map((s) => s[key]))),
  })),
});
writeReport(
  'gateway',
  [
    method,
    '',
    `| ${columns.join(' | ')} |`,
    `| ${columns.map(() => '---').join(' | ')} |`,
    ...rows.map((row) => `| ${Object.values(row).join(' | ')} |`),
    '',
    throughputChart,
    '',
    latencyChart,
  ].join('\n'),
);

admin.disconnect();
for (const child of children) child.kill('SIGTERM');
const redis = new Redis(REDIS_URL);
for (const pattern of [
  `bench-${runId}*`,
  `{herald}:${queueName}-base:*`,
  `{herald}:${queueName}:*`,
  `{herald}:${queueName}-peer:*`,
]) {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.del(...keys);
  } while (cursor !== '0');
}
redis.disconnect();
