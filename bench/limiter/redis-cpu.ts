// What Redis does for the limiter benchmarks: redis-benchmark runs, and Redis's CPU per call of a script
// (INFO commandstats usec_per_call) on a private redis-server, shared by run.ts (Herald against
// rate-limiter-flexible) and scripts-vs.ts (Herald's scripts against those of another revision).
import { spawn } from 'node:child_process';
import { hasRedisServerBinary, startRedisServer } from '@herald/testing';
import { Redis } from 'ioredis';

/** Calls in flight at once, for Herald, rate-limiter-flexible and redis-benchmark (-c) alike. */
export const CONCURRENCY = 50;
/** redis-benchmark's pipelined run: commands per pipeline (-P). */
export const PIPELINE = 16;
/** The normal path spreads calls over this many ids, each far from its limit: every call is allowed. */
export const IDS = 10_000;

export interface Sample {
  perSecond: number;
  /** Sorted latencies (ms) of this round; redis-benchmark gives its own p50/p99 instead. */
  latencies?: Float64Array;
  p50Ms?: number;
  p99Ms?: number;
}

/** redis-benchmark with `args` (a command), CONCURRENCY clients; its own rps and percentiles. */
export async function redisBenchmark(
  url: string,
  args: string[],
  requests: number,
  pipeline: number,
): Promise<Sample> {
  const { hostname, port, password } = new URL(url);
  const cli = [
    ...['-h', hostname, '-p', port || '6379'],
    ...(password ? ['-a', decodeURIComponent(password)] : []),
    ...['-c', String(CONCURRENCY), '-n', String(Math.round(requests)), '-r', String(IDS)],
    ...['-P', String(pipeline), '--csv', ...args],
  ];
  const child = spawn('redis-benchmark', cli, { stdio: ['ignore', 'pipe', 'ignore'] });
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString();
  });
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  const line = out.split('\n').find((l) => l.startsWith('"EVALSHA'));
  if (code !== 0 || line === undefined) return { perSecond: Number.NaN };
  const fields = line.split('","').map((f) => f.replaceAll('"', ''));
  return { perSecond: Number(fields[1]), p50Ms: Number(fields[4]), p99Ms: Number(fields[6]) };
}

export function connect(url: string): Promise<Redis> {
  // One client shared by both libraries. Auto-pipelining stays off (ioredis's default): measured on this
  // 2-core machine it lowered both libraries (Node and Redis then take turns on one batch).
  const redis = new Redis(url, {
    enableAutoPipelining: false,
    enableOfflineQueue: false,
    autoResendUnfulfilledCommands: false,
    maxRetriesPerRequest: 1,
    lazyConnect: true,
  });
  return redis.connect().then(() => redis);
}

/** A script and the arguments of one call of it (`__rand_int__` in a key: one of IDS per call). */
export interface ScriptWorkload {
  name: string;
  lua: string;
  /** KEYS then ARGV of one call, `key` being the base of its keys. */
  args: (key: string) => string[];
  /** Decisions per call (default 1): the figure is per decision. */
  decisions?: number;
  /** numkeys (default `decisions`). */
  keys?: number;
}

/** One run of a script: µs per decision by INFO commandstats, and by the main thread's CPU time. */
export interface CpuSample {
  /** usec_per_call / decisions per call: the script's own time, wall clock inside Redis. */
  us: number;
  /**
   * used_cpu_user + used_cpu_sys of Redis's main thread over the run, per call and decision: CPU time,
   * so preemption by other processes does not count, but reading and answering the calls does.
   */
  cpuUs: number;
}

/** What {@link commandstats} measured of one script. */
export interface ScriptCpu {
  name: string;
  /** The least `us` of the repetitions. */
  usPerCall: number;
  /** Every repetition, in order (the scripts took turns: sample r of two scripts are neighbours). */
  samples: CpuSample[];
}

function mainThreadCpuUs(info: string): number {
  const seconds = (field: string) => Number(new RegExp(`${field}:([\\d.]+)`).exec(info)?.[1]);
  return (seconds('used_cpu_user_main_thread') + seconds('used_cpu_sys_main_thread')) * 1e6;
}

/**
 * Redis CPU per decision (µs) of each script, on a private redis-server: INFO commandstats usec_per_call
 * divided by the decisions per call, under redis-benchmark -P 16 (30,000 decisions a run). The scripts
 * take turns, `repetitions` times (every other time in reverse order), and each keeps its least figure
 * (preemption only ever adds). A sanity
 * check makes sure the script really decided (code 1).
 */
export async function commandstats(scripts: ScriptWorkload[], repetitions = 3): Promise<ScriptCpu[]> {
  if (!hasRedisServerBinary()) return [];
  const server = await startRedisServer();
  try {
    const admin = await connect(server.url);
    const perScript = new Map<string, CpuSample[]>(scripts.map((s) => [s.name, []]));
    for (let rep = 0; rep < repetitions; rep++) {
      // Every other repetition in reverse order: neighbours take turns at going first.
      for (const script of rep % 2 === 0 ? scripts : [...scripts].reverse()) {
        const sha = (await admin.script('LOAD', script.lua)) as string;
        await admin.flushall();
        await admin.config('RESETSTAT');
        const cpuBefore = mainThreadCpuUs(await admin.info('cpu'));
        const decisions = script.decisions ?? 1;
        const command = [
          'EVALSHA',
          sha,
          String(script.keys ?? decisions),
          ...script.args('k:{__rand_int__}'),
        ];
        await redisBenchmark(server.url, command, 30_000 / decisions, PIPELINE);
        const cpuUs = mainThreadCpuUs(await admin.info('cpu')) - cpuBefore;
        const stats = await admin.info('commandstats');
        const evalsha = /cmdstat_evalsha:calls=(\d+).*usec_per_call=([\d.]+)/.exec(stats);
        const calls = Number(evalsha?.[1]);
        perScript.get(script.name)!.push({
          us: Number(evalsha?.[2]) / decisions,
          cpuUs: cpuUs / calls / decisions,
        });
        const check = (await admin.evalsha(
          sha,
          script.keys ?? decisions,
          ...script.args('k:{check}').map((a) => a.replaceAll('__rand_int__', '0')),
        )) as number[];
        if (check[0] !== 1) throw new Error(`${script.name} did not decide (reply ${JSON.stringify(check)})`);
      }
    }
    admin.disconnect();
    // The minimum of the repetitions: on a shared machine preemption only ever adds to usec_per_call.
    return scripts.map((s) => {
      const samples = perScript.get(s.name)!;
      return { name: s.name, usPerCall: Math.min(...samples.map((x) => x.us)), samples };
    });
  } finally {
    await server.dispose();
  }
}
