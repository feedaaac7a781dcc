// Writes bench/README.md, the report the benchmarks write. The whole file is rendered from here: a
// header (machine, versions, commit), then one section per benchmark (command, a few lines of method,
// then the figures its last run wrote). A run replaces its own figures and re-renders the rest around
// them; `pnpm bench` first clears every section (`tsx report.ts --fresh`), so a full run writes the
// file afresh. The file's history is git's.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const README = new URL('./README.md', import.meta.url);

type Section = {
  name: 'limiter' | 'gateway' | 'delivery' | 'cost' | 'cluster' | 'memory' | 'fanout' | 'soak';
  title: string;
  file: string;
  commands: string;
  method: string;
};

/** Every benchmark's section, in the order `pnpm bench` runs them. */
const SECTIONS: readonly Section[] = [
  {
    name: 'limiter',
    title: 'Rate limiter',
    file: 'limiter/run.ts',
    commands: `npx pnpm@12.4.2 bench:limiter    # about 2 minutes; BENCH_ROUNDS=5 BENCH_ROUND_SECONDS=1.8 REDIS_URL=redis://127.0.0.1:6379
npx pnpm@12.4.2 bench:limiter-scripts    # Lua cost against another revision (BENCH_BASE=main; BENCH_CALLGRIND=1 for instructions); prints only
npx pnpm@12.4.2 bench:inbox-append    # the inbox append script likewise (BENCH_BASE=main; BENCH_CALLGRIND=1); prints only`,
    method: `Decisions/s with 50 calls in flight against rate-limiter-flexible's \`RateLimiterRedis\` and
\`redis-benchmark\` running the same token bucket, contenders in a rotated order each round, ratios the
median of per-round ratios; then Redis µs per decision of each script on a private \`redis-server\`.`,
  },
  {
    name: 'gateway',
    title: 'Gateway',
    file: 'gateway/run.ts',
    commands: `npx pnpm@12.4.2 bench:gateway    # about 5 minutes; BENCH_ROUNDS=5 BENCH_SECONDS=5 BENCH_CONNECTIONS=50
BENCH_BASELINE=/tmp/herald-old npx pnpm@12.4.2 bench:gateway    # and an older built checkout's gateway`,
    method: `\`POST /notify\` under autocannon, every server its own process on one Redis: bare Fastify, Herald's
limiter alone, the full gateway, and the references it is held to: (a) bare Fastify + one BullMQ
\`add\`, (b) Fastify + \`@fastify/rate-limit\` (Redis store) + one \`add\`. 2 s warm-up each, then rounds
in a rotated order (the full gateway, (a) and (b) back to back, and a baseline next to its counterpart);
ratios are medians of per-round ratios. Targets: full gateway ≥ 1.0× (a), ≥ 1.5× (b).
The full gateway, (a) and (b) run again with 4× the connections: with few requests in flight the
gateway waits on two round trips (the limiter's decision, then its envelope's add) where (a) waits on one.
autocannon shares the 2 cores, so each round also counts the CPU of the server's processes (/proc) and
of Redis (INFO cpu) per request answered; the column \`(a) / this, (b) / this\` is the references' over the full
gateway's: how many more requests one core carries.`,
  },
  {
    name: 'delivery',
    title: 'Delivery',
    file: 'delivery/run.ts',
    commands: `npx pnpm@12.4.2 bench:delivery    # about 3 minutes; BENCH_SECONDS=10 BENCH_HOLD_SECONDS=30 BENCH_USERS=1000 BENCH_RATES=500,1000,2000
BENCH_BASELINE=/tmp/herald-old npx pnpm@12.4.2 bench:delivery    # side by side with an older commit, about 13 minutes`,
    method: `\`POST /notify\` to the \`notification\` event of a socket.io-client, open loop, per pipeline its own
\`redis-server\`, a gateway, a worker, two realtime instances and 1,000 users. Peer: bare Socket.IO with
\`@socket.io/redis-adapter\` and an emitter. Highest rate held: p99 < 100 ms for 30 s. Server CPU per
notification: gateway + worker + realtime + Redis (\`/proc\`) ÷ rate; with a baseline, medians of 5
rounds each. Memory per idle connection at 5,000 against a bare Socket.IO server.`,
  },
  {
    name: 'cost',
    title: 'Cost per notification',
    file: 'cost/run.ts',
    commands: `npx pnpm@12.4.2 bench:cost    # about 3 minutes; BENCH_RATE=1000 BENCH_SECONDS=10 BENCH_USERS=300 BENCH_ROUNDS=3 BENCH_TOP=8 BENCH_ENVELOPES=30:30
BENCH_BASELINE=/tmp/herald-old npx pnpm@12.4.2 bench:cost    # an older built checkout beside it`,
    method: `CPU µs per notification of each process (\`/proc\`) and of Redis (\`INFO cpu\`), end to end at
\`BENCH_RATE\` to \`BENCH_USERS\` connected users, each pipeline on its own \`redis-server\`, rounds taking
turns, medians; beside the defaults, this checkout with fuller envelopes (\`BENCH_ENVELOPES\`: a longer
\`HERALD_ENVELOPE_WINDOW_MS\` and \`HERALD_ENVELOPE_TARGET_ITEMS\`, Redis saved against latency added). Redis's socket reads and writes
(\`INFO stats\`) per notification count the round trips and pub/sub deliveries, most of them one per envelope,
not per notification: on a VM each costs Redis kernel time that no command shows. One more round logs every command
(\`SLOWLOG\`, threshold 0) for the breakdown by script.`,
  },
  {
    name: 'cluster',
    title: 'Redis Cluster spread',
    file: 'cluster/run.ts',
    commands: `npx pnpm@12.4.2 bench:cluster    # about 3 minutes; BENCH_RATE=1000 BENCH_SECONDS=10 BENCH_USERS=300 BENCH_ROUNDS=2 BENCH_PARTITIONS=3
BENCH_BASELINE=/tmp/herald-old npx pnpm@12.4.2 bench:cluster    # and an older built checkout's pipeline on a Cluster of its own`,
    method: `The same pipeline on a local 3-master Redis Cluster (\`HERALD_QUEUE_PARTITIONS=3\`, sharded pub/sub)
and on one \`redis-server\`, rounds alternating: each master's Redis CPU per notification and its share of
the mean (goal ±15 %), and the Cluster's cost against one node; and a second Cluster whose window is the default
(20 ms) times the partitions, so that each partition's envelopes gather what one node's do.`,
  },
  {
    name: 'memory',
    title: 'Redis memory',
    file: 'memory/run.ts',
    commands: `npx pnpm@12.4.2 bench:memory    # about a minute; BENCH_USERS=500 BENCH_PER_USER=20`,
    method: `What Herald keeps in Redis after \`BENCH_PER_USER\` notifications to each of \`BENCH_USERS\` connected
users, every key weighed with \`MEMORY USAGE … SAMPLES 0\` and grouped by shape; the peer is the payload
the sender posted.`,
  },
  {
    name: 'fanout',
    title: 'Fan-out',
    file: 'fanout/run.ts',
    commands: `npx pnpm@12.4.2 bench:fanout    # about a minute; BENCH_SIZES=10000,100000 BENCH_SINGLES_PER_SECOND=20`,
    method: `A topic send to 10,000 and 100,000 offline subscribers through the whole pipeline: recipients/s
(202 → the status's \`sentAt\`) and Redis µs per recipient; during the larger one, another tenant's
single sends to a live socket, against the same sends with nothing else running.`,
  },
  {
    name: 'soak',
    title: 'Soak',
    file: 'soak/run.ts',
    commands: `npx pnpm@12.4.2 bench:soak    # about 11 minutes; SOAK_PER_SECOND=500 SOAK_MS=600000 SOAK_USERS=200`,
    method: `Ten minutes through the chaos suite's stack and ledger (append-only Redis, retries with the same
\`Idempotency-Key\`): each process's RSS and live heap, Redis memory and keys sampled every 10 s; flat
means the last 3 samples within 10 % of the first 3 after a 4-minute warm-up; the ledger must be exact
and the stack keep up (≥ 95 % of the offered rate accepted after warm-up).`,
  },
];

type Name = Section['name'];

const marks = (name: Name) => [`<!-- bench:${name} -->`, `<!-- /bench:${name} -->`] as const;

/** The figures each section holds now (what its last run wrote), by name. */
function currentFigures(text: string): Map<Name, string> {
  const figures = new Map<Name, string>();
  for (const { name } of SECTIONS) {
    const [open, close] = marks(name);
    const start = text.indexOf(open);
    const end = text.indexOf(close);
    if (start >= 0 && end > start) {
      const body = text.slice(start + open.length, end).trim();
      if (body !== '' && !body.startsWith('_Not run')) figures.set(name, body);
    }
  }
  return figures;
}

function quiet(file: string, args: string[]): string {
  try {
    return execFileSync(file, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return 'unknown';
  }
}

function versions(): string {
  // bench/package.json pins its peers exactly: the versions every contender ran.
  const { dependencies } = JSON.parse(readFileSync(new URL('./package.json', import.meta.url), 'utf8')) as {
    dependencies: Record<string, string>;
  };
  const pinned = (pkg: string) => dependencies[pkg] ?? '?';
  const redis = quiet('redis-server', ['--version']).match(/v=(\S+)/)?.[1] ?? 'unknown';
  return [
    `Node ${process.version}`,
    `redis-server ${redis}`,
    ...['fastify', 'bullmq', 'ioredis', 'socket.io'].map((pkg) => `${pkg} ${pinned(pkg)}`),
  ].join(', ');
}

function render(figures: Map<Name, string>): string {
  const cpu = cpus();
  const head = [
    '# Benchmarks',
    '',
    '_This file is written by the benchmarks (`bench/report.ts`): do not edit it by hand. `npx pnpm@12.4.2 bench`',
    'runs them all (about an hour) and writes it afresh; each `bench:<name>` replaces its own section. Earlier',
    'figures are in git._',
    '',
    `Last written on ${cpu.length} × ${cpu[0]?.model.trim() ?? 'unknown CPU'}, ${Math.round(totalmem() / 2 ** 30)} GiB; ${versions()};`,
    `commit ${quiet('git', ['log', '-1', '--format=%h'])} (each section's stamp names its own commit and machine). Every figure compares Herald with a peer in the same run, on loopback: a`,
    'machine is shared and noisy, so absolute rates move between runs and same-run ratios much less; none is an',
    'assertion in the test suite. With `BENCH_BASELINE`, an older commit runs beside this one, built with',
    '`git worktree add /tmp/herald-old <commit> && (cd /tmp/herald-old && npx pnpm@12.4.2 install && npx pnpm@12.4.2 build)`.',
    '',
  ];
  const body = SECTIONS.flatMap((section) => {
    const [open, close] = marks(section.name);
    return [
      `## ${section.title} (\`${section.file}\`)`,
      '',
      '```sh',
      section.commands,
      '```',
      '',
      section.method,
      '',
      open,
      figures.get(section.name) ?? `_Not run yet: \`npx pnpm@12.4.2 bench:${section.name}\`._`,
      close,
      '',
    ];
  });
  return [...head, ...body].join('\n');
}

/**
 * Replaces section `name` of bench/README.md with `markdown`, stamped with the command, the commit and
 * the time, and renders the rest of the file around it. `BENCH_WRITE_README=0` leaves the README alone
 * (a run to look at, not to report).
 */
export function writeReport(name: Name, markdown: string): void {
  if (process.env.BENCH_WRITE_README === '0') return;
  const figures = currentFigures(readFileSync(README, 'utf8'));
  const cpu = cpus();
  const stamp = `_Written by \`npx pnpm@12.4.2 bench:${name}\` at ${quiet('git', ['log', '-1', '--format=%h'])} on ${new Date().toISOString()}, on ${cpu.length} × ${cpu[0]?.model.trim() ?? 'unknown CPU'}._`;
  figures.set(name, `${stamp}\n\n${markdown.trim()}`);
  writeFileSync(README, render(figures));
}

/** The short commit of a checkout (a `BENCH_BASELINE`), for a report. */
export function commitOf(dir: string): string {
  try {
    return execFileSync('git', ['-C', dir, 'log', '-1', '--format=%h'], { encoding: 'utf8' }).trim();
  } catch {
    return dir;
  }
}

// `tsx report.ts --fresh`: every section empty (the start of `pnpm bench`); `tsx report.ts`: the file
// re-rendered around the figures it holds.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const fresh = process.argv.includes('--fresh');
  writeFileSync(README, render(fresh ? new Map() : currentFigures(readFileSync(README, 'utf8'))));
}
