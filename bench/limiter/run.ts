// Benchmark of @herald/rate-limiter against rate-limiter-flexible and against Redis's own ceiling
// (redis-benchmark running Herald's token-bucket script by EVALSHA), side by side in one run against one
// Redis (REDIS_URL, else 127.0.0.1:6379), loopback only. Not a test: nothing here asserts.
//
//   pnpm --filter @herald/bench limiter      (BENCH_ROUNDS=5, BENCH_ROUND_SECONDS=1.8; whole run about 2 min)
//
// The machine is shared and noisy, so every contender runs once per round, in a rotated order, for the
// same time, and the ratios are the MEDIAN OF PER-ROUND RATIOS (two contenders of one round saw the same
// noise). Every Node contender uses the same harness: CONCURRENCY callers, each a tight loop of awaits.
// Finally, Redis's CPU per call of each library's script (INFO commandstats usec_per_call) is measured
// on a private redis-server started here: a noise-free comparison of the work each one asks of Redis.
import { randomBytes } from 'node:crypto';
import { batchScriptSource, RateLimiter, scriptSource } from '@herald/rate-limiter';
import type { Redis } from 'ioredis';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import { writeReport } from '../report.js';
import { writeChart } from '../svg.js';
import {
  CONCURRENCY,
  commandstats,
  connect,
  IDS,
  PIPELINE,
  redisBenchmark,
  type Sample,
} from './redis-cpu.js';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const ROUND_SECONDS = Number(process.env.BENCH_ROUND_SECONDS ?? 1.8);
const WARMUP_SECONDS = 0.3;
const NORMAL = { capacity: 1_000_000, ratePerSecond: 1_000_000 };

interface Contender {
  name: string;
  run(seconds: number): Promise<Sample>;
  samples: Sample[];
}

/** CONCURRENCY callers, each `await op()` in a tight loop, for `seconds`. */
async function loop(op: (i: number) => Promise<unknown>, seconds: number, record = true): Promise<Sample> {
  let latencies = new Float64Array(1 << 18);
  let count = 0;
  let next = 0;
  const started = performance.now();
  const deadline = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      for (;;) {
        const t = performance.now();
        if (t >= deadline) return;
        await op(next++);
        if (!record) continue;
        if (count === latencies.length) {
          const bigger = new Float64Array(latencies.length * 2);
          bigger.set(latencies);
          latencies = bigger;
        }
        latencies[count++] = performance.now() - t;
      }
    }),
  );
  const elapsedS = (performance.now() - started) / 1000;
  return { perSecond: next / elapsedS, latencies: latencies.slice(0, count).sort() };
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

function median(values: number[]): number {
  const sorted = values.filter(Number.isFinite).sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** A redis-benchmark contender sized to last about `seconds` from the previous round's rate. */
function benchmarkContender(
  name: string,
  url: string,
  args: string[],
  pipeline: number,
  guess: number,
): Contender {
  const contender: Contender = {
    name,
    samples: [],
    run: (seconds) => {
      const last = contender.samples.at(-1)?.perSecond;
      const rate = last !== undefined && Number.isFinite(last) ? last : guess;
      return redisBenchmark(url, args, Math.max(1000, rate * seconds), pipeline);
    },
  };
  return contender;
}

function nodeContender(name: string, op: (i: number) => Promise<unknown>): Contender {
  return { name, samples: [], run: (seconds) => loop(op, seconds) };
}

/** As RateLimiter's `coalesceWrites`: cork once per tick, uncork in process.nextTick. */
function corkUntilNextTick(stream: Redis['stream']): void {
  if (stream.writableCorked !== 0) return;
  stream.cork();
  process.nextTick(() => stream.uncork());
}

function fmt(n: number, digits = 0): string {
  return Number.isFinite(n)
    ? n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })
    : 'n/a';
}

async function main(): Promise<void> {
  const benchStarted = performance.now();
  const redis = await connect(REDIS_URL);
  const run = `bench:${randomBytes(4).toString('hex')}:`;
  const redisVersion = /redis_version:(\S+)/.exec(await redis.info('server'))?.[1] ?? '?';

  const herald = (
    algorithm: 'token-bucket' | 'gcra',
    prefix: string,
    capacity: number,
    ratePerSecond: number,
  ) =>
    new RateLimiter({
      redis,
      algorithm,
      keyPrefix: `${run}${prefix}:`,
      policies: [{ name: 'p', capacity, ratePerSecond }],
      // Generous: this measures Redis decisions; a fallback would be counted and reported below.
      failure: { mode: 'closed', timeoutMs: 2000 },
    });
  const rlf = (prefix: string, points: number, duration: number, block = false) =>
    new RateLimiterRedis({
      storeClient: redis,
      keyPrefix: `${run}${prefix}`,
      points,
      duration,
      ...(block ? { inMemoryBlockOnConsumed: points, inMemoryBlockDuration: duration } : {}),
    });
  const ids = Array.from({ length: IDS }, (_, i) => `user-${i}`);
  let fallbacks = 0;
  const consume = async (limiter: RateLimiter, id: string) => {
    const result = await limiter.consume(id);
    if (result.source === 'fallback') fallbacks++;
    return result;
  };
  const rlfConsume = async (limiter: RateLimiterRedis, id: string) => {
    try {
      return await limiter.consume(id);
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) throw rejection;
      return rejection;
    }
  };

  const tb = herald('token-bucket', 'tb', NORMAL.capacity, NORMAL.ratePerSecond);
  // The gateway's call: two policies, one sender for every call and one recipient of IDS each.
  const twoPolicies = (prefix: string, batchCalls: boolean) =>
    new RateLimiter({
      redis,
      keyPrefix: `${run}${prefix}:`,
      policies: [
        { name: 'sender', ...NORMAL },
        { name: 'recipient', ...NORMAL },
      ],
      batchCalls,
      failure: { mode: 'closed', timeoutMs: 2000 },
    });
  const tb2 = twoPolicies('tb2', true);
  const tb2Unbatched = twoPolicies('tb2-unbatched', false);
  const consume2 = async (limiter: RateLimiter, id: string) => {
    const result = await limiter.consume({ sender: 'k', recipient: id });
    if (result.source === 'fallback') fallbacks++;
    return result;
  };
  const gcra = herald('gcra', 'gcra', NORMAL.capacity, NORMAL.ratePerSecond);
  const flexible = rlf('rlf', NORMAL.capacity, NORMAL.capacity / NORMAL.ratePerSecond);
  // The script Herald runs for a one-bucket call, with the arguments Herald sends:
  // KEYS[1], then ARGV: now ("" = Redis TIME), TTL margin ms, capacity, rate, cost.
  const tbLua = scriptSource('token-bucket', 1);
  const sha = (await redis.script('LOAD', tbLua)) as string;
  const tbArgs = (key: string) => [
    key,
    '',
    '1000',
    String(NORMAL.capacity),
    String(NORMAL.ratePerSecond),
    '1',
  ];
  const evalsha = ['EVALSHA', sha, '1', ...tbArgs(`${run}rb:{__rand_int__}`)];

  // Hot keys being denied: capacity 1, 0.001/s, exhausted before the measurement.
  const hotTb = herald('token-bucket', 'hot-tb', 1, 0.001);
  await hotTb.consume('hot');
  const hotRlf = rlf('hot-rlf', 1, 1000);
  await rlfConsume(hotRlf, 'hot');
  const hotRlfBlock = rlf('hot-rlf-block', 1, 1000, true);
  await rlfConsume(hotRlfBlock, 'hot');
  await rlfConsume(hotRlfBlock, 'hot');

  const N = {
    tb: 'Herald token bucket',
    tb2: 'Herald token bucket, two policies (sender + recipient)',
    tb2Unbatched: 'Herald token bucket, two policies, batchCalls: false',
    gcra: 'Herald GCRA',
    rlf: 'rate-limiter-flexible RateLimiterRedis',
    rb: 'redis-benchmark EVALSHA token bucket',
    rbP: `redis-benchmark EVALSHA token bucket -P ${PIPELINE}`,
    rlfCork: 'rate-limiter-flexible + write coalescing by the harness',
    hot: 'Herald token bucket, denied hot key (deny cache)',
    hotRlf: 'rate-limiter-flexible, denied hot key',
    hotRlfBlock: 'rate-limiter-flexible, denied hot key (inMemoryBlockOnConsumed)',
  } as const;
  const contenders: Contender[] = [
    nodeContender(N.tb, (i) => consume(tb, ids[i % IDS]!)),
    nodeContender(N.tb2, (i) => consume2(tb2, ids[i % IDS]!)),
    nodeContender(N.tb2Unbatched, (i) => consume2(tb2Unbatched, ids[i % IDS]!)),
    nodeContender(N.gcra, (i) => consume(gcra, ids[i % IDS]!)),
    nodeContender(N.rlf, (i) => rlfConsume(flexible, ids[i % IDS]!)),
    // Not a library setting: the harness gives rate-limiter-flexible the one-write-per-tick coalescing
    // Herald does itself (`coalesceWrites`), to show how much of the gap that is.
    nodeContender(N.rlfCork, (i) => {
      corkUntilNextTick(redis.stream);
      return rlfConsume(flexible, ids[i % IDS]!);
    }),
    benchmarkContender(N.rb, REDIS_URL, evalsha, 1, 20_000),
    benchmarkContender(N.rbP, REDIS_URL, evalsha, PIPELINE, 60_000),
    nodeContender(N.hot, () => consume(hotTb, 'hot')),
    nodeContender(N.hotRlf, () => rlfConsume(hotRlf, 'hot')),
    nodeContender(N.hotRlfBlock, () => rlfConsume(hotRlfBlock, 'hot')),
  ];

  process.stderr.write(`warm-up (${WARMUP_SECONDS} s each)\n`);
  for (const c of contenders) if (!c.name.startsWith('redis-benchmark')) await c.run(WARMUP_SECONDS);
  for (let round = 0; round < ROUNDS; round++) {
    process.stderr.write(`round ${round + 1}/${ROUNDS}:`);
    for (let k = 0; k < contenders.length; k++) {
      const c = contenders[(k + round) % contenders.length]!;
      const sample = await c.run(ROUND_SECONDS);
      c.samples[round] = sample;
      process.stderr.write(` ${fmt(sample.perSecond)}`);
    }
    process.stderr.write('\n');
  }
  redis.disconnect();

  process.stderr.write('Redis CPU per call (private redis-server, INFO commandstats)\n');
  const one = [String(NORMAL.capacity), String(NORMAL.ratePerSecond), '1'];
  const twoBuckets = [...one, ...one];
  // A batch script's arguments for 16 one-bucket calls: the keys, now, margin, then per call its number
  // of buckets (1) and that bucket's capacity, rate and cost.
  const sixteenOneBucketCalls = (key: string) => [
    ...Array.from({ length: 16 }, (_, i) => `${key}:${i}`),
    '',
    '1000',
    ...Array.from({ length: 16 }, () => ['1', ...one]).flat(),
  ];
  const cpu = await commandstats([
    { name: 'Herald token bucket (token-bucket-1.lua)', lua: tbLua, args: tbArgs },
    {
      name: 'Herald token bucket, N-policy script (token-bucket-n.lua)',
      lua: scriptSource('token-bucket'),
      args: tbArgs,
    },
    {
      name: 'Herald token bucket, 16 decisions per call (token-bucket-m.lua), per decision',
      lua: batchScriptSource('token-bucket')!,
      decisions: 16,
      args: sixteenOneBucketCalls,
    },
    {
      name: 'Herald two policies, one call (token-bucket-n.lua, sender + recipient), per decision',
      lua: scriptSource('token-bucket'),
      keys: 2,
      args: (key) => [`${key}:s`, `${key}:r`, '', '1000', ...twoBuckets],
    },
    {
      name: 'Herald two policies, 16 calls per call (token-bucket-m.lua, 32 buckets), per decision',
      lua: batchScriptSource('token-bucket')!,
      decisions: 16,
      keys: 32,
      args: (key) => [
        ...Array.from({ length: 16 }, (_, i) => [`k:{sender}`, `${key}:${i}`]).flat(),
        '',
        '1000',
        ...Array.from({ length: 16 }, () => ['2', ...twoBuckets]).flat(),
      ],
    },
    { name: 'Herald GCRA (gcra-1.lua)', lua: scriptSource('gcra', 1), args: tbArgs },
    {
      name: 'Herald GCRA, 16 decisions per call (gcra-m.lua), per decision',
      lua: batchScriptSource('gcra')!,
      decisions: 16,
      args: sixteenOneBucketCalls,
    },
    {
      name: 'rate-limiter-flexible (SET NX EX + INCRBY + PTTL)',
      // RateLimiterRedis's script and arguments: KEYS[1], ARGV: points to consume, duration (s).
      lua: (flexible as unknown as { _incrTtlLuaScript: string })._incrTtlLuaScript,
      args: (key) => [key, '1', '1'],
    },
  ]);

  const byName = (name: string) => contenders.find((c) => c.name === name)!;
  const roundRatio = (a: string, b: string) =>
    median(byName(a).samples.map((s, r) => s.perSecond / byName(b).samples[r]!.perSecond));
  const rows = contenders.map((c) => {
    const pooled = c.samples.flatMap((s) => (s.latencies ? [...s.latencies] : []));
    const sorted = Float64Array.from(pooled).sort();
    const latencyOf = (p: number, key: 'p50Ms' | 'p99Ms') =>
      sorted.length > 0 ? percentile(sorted, p) : median(c.samples.map((s) => s[key] ?? Number.NaN));
    return {
      name: c.name,
      perSecond: median(c.samples.map((s) => s.perSecond)),
      p50: latencyOf(50, 'p50Ms'),
      p99: latencyOf(99, 'p99Ms'),
      vsRlf: roundRatio(c.name, N.rlf),
      vsCeiling: roundRatio(c.name, N.rbP),
    };
  });
  const width = Math.max(...rows.map((r) => r.name.length));
  const table = [
    `| ${'measurement'.padEnd(width)} | decisions/s | p50 ms | p99 ms | vs rate-limiter-flexible | vs EVALSHA -P ${PIPELINE} |`,
    `| ${'-'.repeat(width)} | ----------: | -----: | -----: | -----------------------: | -----------------: |`,
    ...rows.map(
      (r) =>
        `| ${r.name.padEnd(width)} | ${fmt(r.perSecond).padStart(11)} | ${fmt(r.p50, 3).padStart(6)} | ${fmt(r.p99, 3).padStart(6)} | ${`${fmt(r.vsRlf, 2)}x`.padStart(24)} | ${`${fmt(100 * r.vsCeiling, 0)}%`.padStart(18)} |`,
    ),
  ];
  const perRound = (a: string, b: string, scale = 1) =>
    byName(a)
      .samples.map((s, r) =>
        fmt((scale * s.perSecond) / byName(b).samples[r]!.perSecond, scale === 1 ? 2 : 0),
      )
      .join(' / ');
  const vsRlf = roundRatio(N.tb, N.rlf);
  const vsCeiling = roundRatio(N.tb, N.rbP);
  const hotVsNormal = roundRatio(N.hot, N.tb);
  const verdict = (ok: boolean) => (ok ? 'met' : 'MISSED');
  const rlfUs = cpu.find((c) => c.name.startsWith('rate-limiter-flexible'))?.usPerCall ?? Number.NaN;
  const report = [
    '',
    // The date and commit are in the report's stamp (writeReport).
    `node ${process.version}, redis ${redisVersion} at ${new URL(REDIS_URL).host}, ${CONCURRENCY} calls in flight, ${ROUNDS} rounds x ${ROUND_SECONDS} s per contender (rotated order); decisions/s = median of rounds; ratios = median of per-round ratios`,
    '',
    ...table,
    '',
    `Herald token bucket / rate-limiter-flexible: ${fmt(vsRlf, 2)}x (target >= 1.3x: ${verdict(vsRlf >= 1.3)}); rounds: ${perRound(N.tb, N.rlf)}`,
    `Herald token bucket / redis-benchmark EVALSHA -P ${PIPELINE}: ${fmt(100 * vsCeiling, 0)}% (target >= 60%: ${verdict(vsCeiling >= 0.6)}); rounds (%): ${perRound(N.tb, N.rbP, 100)}`,
    `Herald two policies, batched / batchCalls: false: ${fmt(roundRatio(N.tb2, N.tb2Unbatched), 2)}x; rounds: ${perRound(N.tb2, N.tb2Unbatched)}`,
    `Herald two policies / one policy: ${fmt(roundRatio(N.tb2, N.tb), 2)}x; rounds: ${perRound(N.tb2, N.tb)}`,
    `Herald denied hot key / normal path: ${fmt(hotVsNormal, 1)}x (target >= 10x: ${verdict(hotVsNormal >= 10)}); rounds: ${perRound(N.hot, N.tb)}`,
    `Herald GCRA / rate-limiter-flexible: ${fmt(roundRatio(N.gcra, N.rlf), 2)}x; rounds: ${perRound(N.gcra, N.rlf)}`,
    `For comparison, Herald token bucket / rate-limiter-flexible with the same write coalescing: ${fmt(roundRatio(N.tb, N.rlfCork), 2)}x; rounds: ${perRound(N.tb, N.rlfCork)}`,
    `Fallback decisions during the run (should be 0): ${fallbacks}`,
    '',
    'Redis CPU per decision (INFO commandstats usec_per_call / decisions per call, private redis-server, redis-benchmark -P 16, least of 3 interleaved repetitions):',
    '',
    '| script | µs per decision | vs rate-limiter-flexible |',
    '| --- | --: | --: |',
    ...cpu.map((c) => `| ${c.name} | ${fmt(c.usPerCall, 2)} | ${fmt(c.usPerCall / rlfUs, 2)}x |`),
    '',
    `Whole run: ${fmt((performance.now() - benchStarted) / 1000, 0)} s`,
  ].join('\n');
  console.log(report);
  // Decisions/s of Herald and of each peer, by scenario: the hot key's in a chart of its own, its
  // ~1.5 M/s would flatten the allowed path's ~50-75 k/s to slivers on one axis.
  const rate = (name: string) => rows.find((r) => r.name === name)?.perSecond;
  const unit = `decisions/s (median of ${ROUNDS} rounds of ${ROUND_SECONDS} s, ${CONCURRENCY} calls in flight)`;
  const allowed = writeChart('limiter-allowed', {
    title: `Rate limiter decisions/s, every call allowed (${IDS.toLocaleString('en-US')} keys): Herald and its peers`,
    unit,
    series: [
      'Herald token bucket',
      'rate-limiter-flexible',
      'Herald GCRA',
      "rate-limiter-flexible + the harness's write coalescing",
      "redis-benchmark EVALSHA (Herald's script)",
      `redis-benchmark EVALSHA -P ${PIPELINE} (Redis's ceiling)`,
    ],
    groups: [
      {
        label: 'one policy',
        values: [rate(N.tb), rate(N.rlf), rate(N.gcra), rate(N.rlfCork), rate(N.rb), rate(N.rbP)],
      },
      { label: 'two policies (sender + recipient)', values: [rate(N.tb2)] },
      { label: 'two policies, batchCalls: false', values: [rate(N.tb2Unbatched)] },
    ],
  });
  const denied = writeChart('limiter-denied', {
    title: 'Rate limiter decisions/s, one hot key being denied: Herald and its peer',
    unit,
    series: [
      'Herald token bucket (deny cache)',
      'rate-limiter-flexible',
      'rate-limiter-flexible + inMemoryBlockOnConsumed',
    ],
    groups: [{ label: 'one hot key, denied', values: [rate(N.hot), rate(N.hotRlf), rate(N.hotRlfBlock)] }],
  });
  // The report keeps each ratio (a median of rounds); its rounds are printed only.
  const medians = report.replace(/; rounds( \(%\))?: [^\n]*/g, '');
  writeReport('limiter', `${medians}\n\n${allowed}\n\n${denied}`);
}

await main();
