// Redis CPU per decision of Herald's limiter scripts against the same scripts at another revision, for
// identical workloads, side by side on one private redis-server (INFO commandstats usec_per_call, the
// scripts taking turns BENCH_REPETITIONS times): what a change to the Lua costs or saves. The base's
// scripts are read from git (`git show <rev>:<path>`, includes expanded as lua.ts does), the current
// ones from the built package. Prints a table; writes no README section.
// BENCH_CALLGRIND=1 counts instructions under valgrind instead of timing: exact whatever the load.
//
//   npx pnpm@12.4.2 bench:limiter-scripts   (BENCH_BASE=main, BENCH_REPETITIONS=5; about 2 min)
//   BENCH_CALLGRIND=1 npx pnpm@12.4.2 bench:limiter-scripts   (BENCH_CALLGRIND_DECISIONS=3000; ~10 min)
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Algorithm, batchScriptSource, expandLua, scriptSource } from '@herald/rate-limiter';
import { startRedisServer } from '@herald/testing';
import { Redis } from 'ioredis';
import { commandstats, type ScriptWorkload } from './redis-cpu.js';

const BASE = process.env.BENCH_BASE ?? 'main';
const CALLGRIND = process.env.BENCH_CALLGRIND === '1';
const REPETITIONS = Number(process.env.BENCH_REPETITIONS ?? (CALLGRIND ? 3 : 5));
const CALLGRIND_DECISIONS = Number(process.env.BENCH_CALLGRIND_DECISIONS ?? 3000);
const SOURCES = 'packages/rate-limiter/src';
/** Far from any limit: every decision is allowed (and writes its bucket). */
const ONE = ['1000000', '1000000', '1'];

const git = (...args: string[]) =>
  execFileSync('git', args, { cwd: root, encoding: 'utf8', maxBuffer: 1 << 24 }).trim();
const root = execFileSync('git', ['rev-parse', '--show-toplevel'], { encoding: 'utf8' }).trim();
const baseCommit = git('rev-parse', '--short', BASE);
const atBase = (file: string) => expandLua(file, (path) => git('show', `${BASE}:${SOURCES}/${path}`));

interface Workload {
  label: string;
  /** The script's file at the base, its source now. */
  file: string;
  lua: string;
  args: ScriptWorkload['args'];
  decisions?: number;
  keys?: number;
}

const oneBucket = (key: string) => [key, '', '1000', ...ONE];
const twoBuckets = (key: string) => [`${key}:s`, `${key}:r`, '', '1000', ...ONE, ...ONE];
/** 16 calls of `buckets` each (every call's first bucket shared when 2, as the gateway's sender). */
const sixteenCalls = (buckets: 1 | 2) => (key: string) => [
  ...Array.from({ length: 16 }, (_, i) =>
    buckets === 1 ? [`${key}:${i}`] : ['k:{s}', `${key}:${i}`],
  ).flat(),
  '',
  '1000',
  ...Array.from({ length: 16 }, () => [String(buckets), ...(buckets === 1 ? ONE : [...ONE, ...ONE])]).flat(),
];

function workloads(algorithm: Algorithm, name: string): Workload[] {
  const n = scriptSource(algorithm);
  const batch = batchScriptSource(algorithm);
  const list: Workload[] = [];
  if (batch !== undefined) {
    list.push({ label: '1 key', file: `${name}-1.lua`, lua: scriptSource(algorithm, 1), args: oneBucket });
  }
  list.push(
    { label: '1 key', file: `${name}-n.lua`, lua: n, args: oneBucket },
    { label: '2 keys, per decision', file: `${name}-n.lua`, lua: n, args: twoBuckets, keys: 2, decisions: 2 },
  );
  if (batch !== undefined) {
    const per = 'per decision';
    list.push(
      {
        label: `16 calls x 1 key, ${per}`,
        file: `${name}-m.lua`,
        lua: batch,
        args: sixteenCalls(1),
        decisions: 16,
      },
      {
        label: `16 calls x 2 keys, ${per}`,
        file: `${name}-m.lua`,
        lua: batch,
        args: sixteenCalls(2),
        decisions: 32,
        keys: 32,
      },
    );
  }
  return list;
}

const all = [
  ...workloads('token-bucket', 'token-bucket'),
  ...workloads('gcra', 'gcra'),
  ...workloads('fixed-window', 'fixed-window'),
  ...workloads('sliding-window', 'sliding-window'),
];
const scripts = all.flatMap((w) => [
  { ...w, name: `base ${w.file} ${w.label}`, lua: atBase(w.file) },
  { ...w, name: `this ${w.file} ${w.label}` },
]);
const median = (values: number[]) => {
  const sorted = values.filter(Number.isFinite).sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2
    ? sorted[mid]
    : ((sorted[mid - 1] ?? Number.NaN) + (sorted[mid] ?? Number.NaN)) / 2;
};
const fmt = (n: number | undefined, digits = 2) =>
  n === undefined || !Number.isFinite(n) ? 'n/a' : n.toFixed(digits);
const head = git('rev-parse', '--short', 'HEAD');
const tree = git('status', '--porcelain', '--', SOURCES) === '' ? head : `${head} + uncommitted changes`;
process.stderr.write(
  `${scripts.length} script runs x ${REPETITIONS} repetitions on a private redis-server\n`,
);
console.log(
  [
    '',
    `Redis per decision, base ${BASE} (${baseCommit}) against this tree (${tree}), one private redis-server,`,
    ...(CALLGRIND ? await instructionsTable() : await commandstatsTable()),
  ].join('\n'),
);

async function commandstatsTable(): Promise<string[]> {
  const measured = new Map((await commandstats(scripts, REPETITIONS)).map((c) => [c.name, c]));
  if (measured.size === 0) throw new Error('redis-server, redis-cli and redis-benchmark must be on PATH');
  return [
    `redis-benchmark -P 16, ${REPETITIONS} repetitions with base and this taking turns. usec: INFO commandstats`,
    "usec_per_call / decisions, least of the repetitions; cpu: the main thread's user + sys CPU time per call",
    '/ decisions (reading and answering included; preemption not), median. this / base: median of the',
    'per-repetition ratios (neighbouring runs saw the same load).',
    '',
    '| script | workload | base usec | this usec | this / base | base cpu | this cpu | this / base |',
    '| --- | --- | --: | --: | --: | --: | --: | --: |',
    ...all.map((w) => {
      const base = measured.get(`base ${w.file} ${w.label}`)?.samples ?? [];
      const now = measured.get(`this ${w.file} ${w.label}`)?.samples ?? [];
      const ratio = (key: 'us' | 'cpuUs') =>
        median(now.map((s, r) => s[key] / (base[r]?.[key] ?? Number.NaN)));
      const least = (samples: typeof base) => Math.min(...samples.map((s) => s.us));
      const cpu = (samples: typeof base) => median(samples.map((s) => s.cpuUs));
      return `| ${w.file} | ${w.label} | ${fmt(least(base))} | ${fmt(least(now))} | ${fmt(ratio('us'), 3)} | ${fmt(cpu(base))} | ${fmt(cpu(now))} | ${fmt(ratio('cpuUs'), 3)} |`;
    }),
  ];
}

/**
 * BENCH_CALLGRIND=1: the instructions Redis's main thread executes per decision, counted by callgrind
 * (valgrind) over CALLGRIND_DECISIONS decisions of each script: a count, not a time, so the machine's
 * load does not move it (what still does: Lua's garbage collector and dict rehashing, about 1%).
 * The calls are the same for base and this: pipelines of 16, keys k:{0} … k:{499} in turn.
 */
async function instructionsTable(): Promise<string[]> {
  for (const tool of ['valgrind', 'callgrind_control']) {
    if (spawnSync(tool, ['--version']).status !== 0)
      throw new Error(`BENCH_CALLGRIND=1 needs ${tool} on PATH`);
  }
  const out = mkdtempSync(join(tmpdir(), 'herald-bench-callgrind-'));
  const server = await startRedisServer({
    wrapper: ['valgrind', '--tool=callgrind', `--callgrind-out-file=${out}/cg.%p`],
    startTimeoutMs: 120_000,
  });
  const counts = new Map<string, number[]>(scripts.map((s) => [s.name, []]));
  const redis = new Redis(server.url);
  try {
    const control = (option: string) =>
      execFileSync('callgrind_control', [option, String(server.process.pid)], { stdio: 'pipe' });
    for (let rep = 0; rep < REPETITIONS; rep++) {
      for (const script of scripts) {
        const sha = (await redis.script('LOAD', script.lua)) as string;
        await redis.flushall();
        const decisions = script.decisions ?? 1;
        const calls = Math.ceil(CALLGRIND_DECISIONS / decisions);
        control('-z');
        for (let first = 0; first < calls; first += 16) {
          const pipeline = redis.pipeline();
          for (let i = first; i < Math.min(calls, first + 16); i++) {
            pipeline.evalsha(sha, script.keys ?? decisions, ...script.args(`k:{${i % 500}}`));
          }
          for (const [error, reply] of (await pipeline.exec()) ?? []) {
            if (error !== null || (reply as number[])[0] !== 1) {
              throw new Error(`${script.name} did not decide: ${error ?? JSON.stringify(reply)}`);
            }
          }
        }
        control('-d');
        // cg.<pid>.<n>: the n-th dump (cg.<pid> itself is written at exit).
        const dumps = readdirSync(out)
          .filter((file) => /^cg\.\d+\.\d+$/.test(file))
          .sort((a, b) => Number(a.split('.').pop()) - Number(b.split('.').pop()));
        const totals = /^totals: (\d+)/m.exec(readFileSync(join(out, dumps.at(-1) ?? ''), 'utf8'));
        counts.get(script.name)?.push(Number(totals?.[1]) / calls / decisions);
      }
    }
  } finally {
    redis.disconnect();
    await server.dispose();
    rmSync(out, { recursive: true, force: true });
  }
  const mean = (values: number[]) => values.reduce((sum, v) => sum + v, 0) / values.length;
  const spread = (values: number[]) =>
    `${fmt(mean(values), 0)} (${fmt(Math.min(...values), 0)}-${fmt(Math.max(...values), 0)})`;
  return [
    `callgrind (valgrind), ${CALLGRIND_DECISIONS} decisions per run, ${REPETITIONS} repetitions with base and this`,
    "taking turns: instructions of Redis's main thread per decision (reading and answering the calls",
    'included), mean (least-most); this / base of the means.',
    '',
    '| script | workload | base instructions | this instructions | this / base |',
    '| --- | --- | --: | --: | --: |',
    ...all.map((w) => {
      const base = counts.get(`base ${w.file} ${w.label}`) ?? [];
      const now = counts.get(`this ${w.file} ${w.label}`) ?? [];
      return `| ${w.file} | ${w.label} | ${spread(base)} | ${spread(now)} | ${fmt(mean(now) / mean(base), 3)} |`;
    }),
  ];
}
