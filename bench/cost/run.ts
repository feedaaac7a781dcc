// What one notification costs, end to end (POST /notify → limiter → queue → worker → inbox → live →
// socket), in CPU µs per notification of each process and of Redis: counts that do not depend on how
// fast or how loaded the machine is (the time a process spends on the work, not how long it waits for
// a core). Each pipeline (this checkout, and `BENCH_BASELINE`'s beside it) runs on its own
// redis-server with `BENCH_USERS` connected users; open-loop load at `BENCH_RATE` for `BENCH_SECONDS`
// per round, rounds alternating between the pipelines; a final round per pipeline with SLOWLOG on
// every command breaks Redis's time down by command and script.
//
// Usage: pnpm --filter @herald/bench cost   (after `pnpm build`)
// Env:   BENCH_RATE (1000), BENCH_SECONDS (10), BENCH_USERS (300), BENCH_ROUNDS (3),
//        BENCH_BASELINE (a built checkout of an older commit: its pipeline in the same rounds),
//        BENCH_CPU_PROF (a folder: each app writes a V8 CPU profile into <folder>/herald or /baseline),
//        BENCH_TOP (8: the commands listed in the by-command table),
//        BENCH_ENVELOPES ("30:30": more pipelines of this checkout, one per `<window ms>:<target items>`
//        given, HERALD_ENVELOPE_WINDOW_MS and HERALD_ENVELOPE_TARGET_ITEMS, each on its own redis-server
//        in the same rounds; "" for none): what fuller envelopes save Redis, and what they add to the
//        latency (POST → socket, p50 / p99, also in the table),
//        BENCH_VARIANTS (a JSON object, label → HERALD_* settings: more pipelines of this checkout, one
//        per label, with those settings; e.g. '{"concurrency 1":{"HERALD_WORKER_CONCURRENCY":"1"}}').
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { Agent } from 'node:http';
import { createRequire } from 'node:module';
import { cpus, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { type RedisServerHandle, startRedisServer, waitFor } from '@herald/testing';
import { Redis } from 'ioredis';
import type { Socket } from 'socket.io-client';
import { cpuTicks, openLoop, type Pipeline, postNotify, startPipeline } from '../delivery/pipeline.js';
import {
  addCommandstats,
  commandstats,
  commandstatsTable,
  median,
  redisCpuMicros,
  redisIo,
} from '../redis-stats.js';
import { writeReport } from '../report.js';
import { writeChart } from '../svg.js';

const RATE = Number(process.env.BENCH_RATE ?? 1000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const USERS = Number(process.env.BENCH_USERS ?? 300);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const BASELINE = process.env.BENCH_BASELINE;
const ENVELOPES = (process.env.BENCH_ENVELOPES ?? '30:30')
  .split(',')
  .filter((pair) => pair.trim() !== '')
  .map((pair) => {
    const [windowMs, targetItems] = pair.split(':').map(Number);
    return { windowMs: windowMs ?? 10, targetItems: targetItems ?? 10 };
  });
const VARIANTS = Object.entries(
  JSON.parse(process.env.BENCH_VARIANTS ?? '{}') as Record<string, Record<string, string>>,
);
const SECRET = 'bench-secret-0123456789abcdef0123456789';
const API_KEY = 'bench-key-0123456789abcdef0123456789abcdef';
const HERE = fileURLToPath(new URL('..', import.meta.url));
const require = createRequire(import.meta.url);

/** Per process group: gateway, worker, realtime A+B, Redis (from INFO), CPU µs per notification. */
const GROUPS = ['gateway', 'worker', 'realtime A+B', 'Redis'] as const;

interface Contender {
  /** `pipeline.label`, with its envelope settings when not the defaults. */
  label: string;
  /** The pipeline of `BENCH_BASELINE`. */
  baseline: boolean;
  pipeline: Pipeline;
  redis: RedisServerHandle;
  admin: Redis;
  /** Script SHA1 → a name (BullMQ's scripts, Herald's Lua files of its checkout). */
  scripts: Map<string, string>;
  received: number;
  /** Where POST → socket ms go: `measuredLatencies` during a measured round, else nowhere. */
  latencies: number[] | undefined;
  rounds: number[][];
  breakdown?: { name: string; calls: number; usec: number }[];
  /** INFO commandstats summed over the measured rounds: command → calls, µs. */
  commandstats: Map<string, { calls: number; usec: number }>;
  /** Notifications accepted in the measured rounds. */
  accepted: number;
  /** POST → socket ms over the measured rounds. */
  measuredLatencies: number[];
  /** INFO stats over the measured rounds: socket reads, writes, bytes in, bytes out. */
  io: number[];
}

async function main(): Promise<void> {
  const started = Date.now();
  const env = {
    HERALD_API_KEYS: API_KEY,
    HERALD_JWT_SECRET: SECRET,
    HERALD_PUBSUB_KEY: 'bench-pubsub',
    // Costs of delivery, not of refusals: limits far above the offered load (each decision still runs).
    HERALD_RATE_LIMIT_PER_SECOND: '100000',
    HERALD_RATE_LIMIT_BURST: '100000',
    HERALD_SENDER_RATE_LIMIT_PER_SECOND: '1000000',
    HERALD_SENDER_RATE_LIMIT_BURST: '1000000',
    HERALD_MAX_CONNECTIONS_PER_USER: '100',
  };
  const contenders: Contender[] = [];
  const sockets: Socket[] = [];
  try {
    const runs: {
      root?: string;
      envelope?: { windowMs: number; targetItems: number };
      variant?: [string, Record<string, string>];
    }[] = [
      {},
      ...(BASELINE === undefined ? [] : [{ root: BASELINE }]),
      ...ENVELOPES.map((envelope) => ({ envelope })),
      ...VARIANTS.map((variant) => ({ variant })),
    ];
    for (const { root, envelope, variant } of runs) {
      const redis = await startRedisServer({ args: ['--appendonly', 'no', '--slowlog-max-len', '1000000'] });
      // BENCH_CPU_PROF=<dir>: every app of the pipeline writes a V8 CPU profile there when it stops.
      const profileDir =
        process.env.BENCH_CPU_PROF && join(process.env.BENCH_CPU_PROF, root ? 'baseline' : 'herald');
      if (profileDir) mkdirSync(profileDir, { recursive: true });
      const profile = profileDir
        ? {
            NODE_OPTIONS: `--import=${pathToFileURL(join(HERE, 'cost/cpu-profile.mjs')).href}`,
            HERALD_BENCH_PROF_DIR: profileDir,
          }
        : {};
      const pipeline = await startPipeline({
        redis,
        env: {
          ...env,
          ...profile,
          ...(envelope === undefined
            ? {}
            : {
                HERALD_ENVELOPE_WINDOW_MS: String(envelope.windowMs),
                HERALD_ENVELOPE_TARGET_ITEMS: String(envelope.targetItems),
              }),
          ...variant?.[1],
        },
        secret: SECRET,
        ...(root ? { root } : {}),
      });
      const contender: Contender = {
        label:
          variant !== undefined
            ? `${pipeline.label}, ${variant[0]}`
            : envelope === undefined
              ? pipeline.label
              : `${pipeline.label}, window ${envelope.windowMs} ms, target ${envelope.targetItems}`,
        baseline: root !== undefined,
        pipeline,
        redis,
        admin: new Redis(redis.url),
        scripts: await scriptNames(root ?? join(HERE, '..')),
        received: 0,
        latencies: undefined,
        rounds: [],
        commandstats: new Map(),
        accepted: 0,
        measuredLatencies: [],
        io: [0, 0, 0, 0],
      };
      contenders.push(contender);
      for (let i = 0; i < USERS; i++) {
        const socket = await pipeline.connect(pipeline.realtimeUrls[i % 2] ?? '', `user-${i}`);
        socket.on('notification', (event: { payload: { t: number } }) => {
          contender.received++;
          contender.latencies?.push(Date.now() - event.payload.t);
        });
        sockets.push(socket);
      }
    }
    const agent = new Agent({ keepAlive: true, maxSockets: 64 });
    // Warm-up, unrecorded: no round measures a JIT compiling a path.
    for (const c of contenders) await round(c, agent, 2, 'warm-up');
    for (let n = 0; n < ROUNDS; n++) {
      for (const c of n % 2 === 0 ? contenders : [...contenders].reverse()) {
        c.rounds.push(await round(c, agent, SECONDS, 'measured'));
      }
    }
    for (const c of contenders) {
      await round(c, agent, SECONDS, 'slowlog');
      c.breakdown = await slowlogBreakdown(c);
    }
    report(contenders, Date.now() - started);
  } finally {
    for (const socket of sockets) socket.disconnect();
    for (const c of contenders) {
      c.admin.disconnect();
      await c.pipeline.stop();
      await c.redis.dispose();
    }
  }
}

/**
 * One round: `RATE`/s for `seconds`, then waits until every notification accepted has reached its
 * socket; answers each group's CPU µs per notification (Redis's from INFO). With `slowlog`, every
 * command is logged (its own cost, which this round's CPU figures then include: not reported).
 */
async function round(
  c: Contender,
  agent: Agent,
  seconds: number,
  mode: 'warm-up' | 'measured' | 'slowlog',
): Promise<number[]> {
  const slowlog = mode === 'slowlog';
  const measured = mode === 'measured';
  await c.admin.config('SET', 'slowlog-log-slower-than', slowlog ? '0' : '-1');
  await c.admin.slowlog('RESET');
  const before = [...c.pipeline.pids.slice(0, 3).map(cpuTicks), await redisCpuMicros(c.admin)];
  const statsBefore = await commandstats(c.admin);
  const ioBefore = await redisIo(c.admin);
  const receivedBefore = c.received;
  c.latencies = measured ? c.measuredLatencies : undefined;
  const accepted = await openLoop(RATE, seconds, (n) =>
    postNotify(agent, c.pipeline.gatewayUrl, API_KEY, `user-${n % USERS}`, { t: Date.now() }),
  );
  await waitFor(() => c.received - receivedBefore >= accepted, { timeoutMs: 120_000, intervalMs: 50 });
  c.latencies = undefined;
  if (slowlog) await c.admin.config('SET', 'slowlog-log-slower-than', '-1');
  const after = [...c.pipeline.pids.slice(0, 3).map(cpuTicks), await redisCpuMicros(c.admin)];
  if (measured) {
    addCommandstats(c.commandstats, statsBefore, await commandstats(c.admin));
    const io = await redisIo(c.admin);
    c.io = c.io.map((sum, i) => sum + (io[i] ?? 0) - (ioBefore[i] ?? 0));
    c.accepted += accepted;
  }
  // Ticks are 10 ms (USER_HZ 100); Redis's figure is µs already.
  return after.map((value, i) => ((value - (before[i] ?? 0)) * (i < 3 ? 10_000 : 1)) / Math.max(1, accepted));
}

/** SLOWLOG of the last round, by command (EVALSHA by script name), µs per notification. */
async function slowlogBreakdown(c: Contender): Promise<{ name: string; calls: number; usec: number }[]> {
  const entries = (await c.admin.slowlog('GET', '-1')) as [number, number, number, string[]][];
  const notifications = RATE * SECONDS;
  const byName = new Map<string, { calls: number; usec: number }>();
  for (const [, , usec, args] of entries) {
    const command = (args[0] ?? '?').toLowerCase();
    if (command === 'slowlog' || command === 'config') continue;
    const name =
      command === 'evalsha' || command === 'fcall'
        ? `${command} ${c.scripts.get(args[1] ?? '') ?? labelByKeys(args)}`
        : `${command} ${keyShape(args[1] ?? '')}`;
    const sum = byName.get(name) ?? { calls: 0, usec: 0 };
    sum.calls++;
    sum.usec += usec;
    byName.set(name, sum);
  }
  return [...byName]
    .map(([name, sum]) => ({ name, calls: sum.calls / notifications, usec: sum.usec / notifications }))
    .sort((a, b) => b.usec - a.usec);
}

/** `key` with its ids (user ids, UUIDs, numbers) as `*`: what kind of key a command touched. */
function keyShape(key: string): string {
  return key
    .replace(/[0-9a-f]{8}-[0-9a-f-]{27}/g, '*')
    .replace(/:n:\{[0-9a-z]{1,4}\}:/g, ':n:{*}:')
    .replace(/user-\d+/g, '*')
    .replace(/\d+/g, '*');
}

/** A script this bench does not know by its SHA, named by what its keys hold. */
function labelByKeys(args: string[]): string {
  const keys = args.slice(3, 3 + Number(args[2] ?? 0)).join(' ');
  if (keys.includes('ratelimit')) return '(rate limiter)';
  return `${(args[1] ?? '').slice(0, 8)} (${keys.slice(0, 40)})`;
}

/** SHA1 → name of BullMQ's scripts (as BullMQ loads them) and of the `.lua` files of `root`'s apps and packages. */
async function scriptNames(root: string): Promise<Map<string, string>> {
  const names = new Map<string, string>();
  const sha = (text: string) => createHash('sha1').update(text).digest('hex');
  const bullmq = pathToFileURL(join(dirname(require.resolve('bullmq')), 'scripts', 'index.js')).href;
  const scripts = (await import(bullmq)) as Record<string, { name: string; content: string }>;
  for (const script of Object.values(scripts)) names.set(sha(script.content), `bullmq ${script.name}`);
  for (const dir of ['apps', 'packages']) {
    for (const name of readdirSync(join(root, dir))) {
      const src = join(root, dir, name, 'src');
      if (!existsSync(src)) continue;
      for (const file of readdirSync(src).filter((f) => f.endsWith('.lua'))) {
        names.set(sha(readFileSync(join(src, file), 'utf8')), `${name} ${file}`);
      }
    }
  }
  return names;
}

function report(contenders: Contender[], elapsedMs: number): void {
  const baseline = contenders.find((c) => c.baseline);
  const label = (c: Contender) => c.label;
  const cell = (c: Contender, i: number) => median(c.rounds.map((r) => r[i] ?? 0));
  const total = (c: Contender) => GROUPS.reduce((sum, _, i) => sum + cell(c, i), 0);
  // Every pipeline of this checkout against the baseline's, group by group.
  const compared = baseline ? contenders.filter((c) => c !== baseline) : [];
  const latency = (c: Contender) => {
    const sorted = [...c.measuredLatencies].sort((a, b) => a - b);
    const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
    return `${at(0.5).toFixed(0)} / ${at(0.99).toFixed(0)}`;
  };
  const lines = [
    `machine: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, node ${process.version}, load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}`,
    `run: ${RATE} notifications/s for ${SECONDS} s per round, ${ROUNDS} rounds per pipeline (medians), ${USERS} connected users over 2 realtime instances, 1 gateway, 1 worker, each pipeline on its own redis-server; ${Math.round(elapsedMs / 1000)} s in all`,
    '',
    `| CPU µs per notification | ${[...contenders.map(label), ...compared.map((c) => `${label(c)} ÷ ${label(baseline as Contender)}`)].join(' | ')} |`,
    `| --- | ${[...contenders, ...compared].map(() => '--:').join(' | ')} |`,
    ...[...GROUPS, 'all'].map((group, i) => {
      const value = (c: Contender) => (group === 'all' ? total(c) : cell(c, i));
      const ratios = compared.map(
        (c) => `${(value(c) / Math.max(1e-9, value(baseline as Contender))).toFixed(2)}×`,
      );
      return `| ${group} | ${[...contenders.map((c) => value(c).toFixed(0)), ...ratios].join(' | ')} |`;
    }),
    `| POST → socket p50 / p99 ms | ${[...contenders.map(latency), ...compared.map(() => '')].join(' | ')} |`,
    `| Redis socket reads / writes per notification | ${perNotification(contenders, compared, 0, 1, 2)} |`,
    `| Redis bytes in / out per notification | ${perNotification(contenders, compared, 2, 3, 0)} |`,
    '',
    writeChart('cost-by-process', {
      title: `CPU µs per notification at ${RATE}/s, by process`,
      unit: 'CPU µs per notification (median of the rounds)',
      series: contenders.map(label),
      groups: [...GROUPS, 'all'].map((group, i) => ({
        label: group,
        values: contenders.map((c) => (group === 'all' ? total(c) : cell(c, i))),
      })),
    }),
    '',
    writeChart('cost-redis-by-script', redisByScript(contenders)),
    '',
    ...commandstatsTable(
      contenders.map((c) => ({ label: c.label, stats: c.commandstats, accepted: c.accepted })),
      8,
    ),
  ];
  // The breakdowns by script (the chart above draws this checkout's) and by command and key go to the
  // terminal only.
  const breakdowns: string[] = [];
  for (const c of contenders) {
    const all = c.breakdown ?? [];
    const scripts = all.filter((r) => r.name.startsWith('evalsha') || r.name.startsWith('fcall'));
    const commands = all.filter((r) => !scripts.includes(r)).slice(0, Number(process.env.BENCH_TOP ?? 8));
    breakdowns.push(
      `Redis by script, ${label(c)} (SLOWLOG of every command, one more round; a script's time includes the commands it calls):`,
      '',
      // µs per call: a script's fixed cost shows here (BullMQ's, whatever the job's size).
      '| script | calls per notification | µs per notification | µs per call |',
      '| --- | --: | --: | --: |',
      ...scripts.map(
        (r) =>
          `| ${r.name.replace(/^evalsha /, '')} | ${r.calls.toFixed(2)} | ${r.usec.toFixed(1)} | ${r.calls > 0 ? (r.usec / r.calls).toFixed(0) : '-'} |`,
      ),
      '',
    );
    breakdowns.push(
      `Redis by command, ${label(c)} (the same round; from clients and from inside scripts, by key; the top 8):`,
      '',
      '| command, key | calls per notification | µs per notification |',
      '| --- | --: | --: |',
      ...commands.map((r) => `| ${r.name} | ${r.calls.toFixed(2)} | ${r.usec.toFixed(1)} |`),
      '',
    );
  }
  const text = lines.join('\n');
  process.stdout.write(`${text}\n${breakdowns.join('\n')}\n`);
  writeReport('cost', text);
}

/** Two of the INFO stats counters (`c.io`) per notification, `a / b`, a cell per contender (none for the ratios). */
function perNotification(
  contenders: Contender[],
  compared: Contender[],
  a: number,
  b: number,
  digits: number,
): string {
  const per = (c: Contender, i: number) => ((c.io[i] ?? 0) / Math.max(1, c.accepted)).toFixed(digits);
  return [...contenders.map((c) => `${per(c, a)} / ${per(c, b)}`), ...compared.map(() => '')].join(' | ');
}

/** Redis µs per notification by script (the SLOWLOG round), the same script of both checkouts on one row. */
function redisByScript(contenders: Contender[]): Parameters<typeof writeChart>[1] {
  // `append-6.lua` and `append-n.lua` are the inbox append of their checkouts: one component.
  const component = (name: string) => name.replace(/^evalsha /, '').replace(/append-(\d+|n)\.lua$/, 'append');
  const rows = new Map<string, (number | undefined)[]>();
  for (const [i, c] of contenders.entries()) {
    for (const r of c.breakdown ?? []) {
      if (!r.name.startsWith('evalsha') && !r.name.startsWith('fcall')) continue;
      const values = rows.get(component(r.name)) ?? contenders.map(() => undefined);
      values[i] = (values[i] ?? 0) + r.usec;
      rows.set(component(r.name), values);
    }
  }
  return {
    title: 'Redis µs per notification by script (SLOWLOG of every command, one round)',
    unit: 'Redis µs per notification (a script with the commands it calls)',
    series: contenders.map((c) => c.label),
    groups: [...rows]
      .sort((a, b) => (b[1][0] ?? 0) - (a[1][0] ?? 0))
      .filter(([, values]) => values.some((value) => (value ?? 0) >= 0.5))
      .map(([label, values]) => ({ label, values })),
  };
}

// The baseline's checkout must be built: its apps' dist are what runs.
if (BASELINE !== undefined && !existsSync(join(BASELINE, 'apps/gateway/dist/server.js'))) {
  throw new Error(`BENCH_BASELINE=${BASELINE} is not a built checkout (no apps/gateway/dist/server.js)`);
}
await main();
