// Benchmark of @herald/rate-limiter against rate-limiter-flexible and against Redis's own ceiling
// (redis-benchmark running Herald's token-bucket script by EVALSHA), side by side in one run against one
// Redis (REDIS_URL, else 127.0.0.1:6379). Prints a table with ratios. Not a test: nothing here asserts.
//
//   pnpm --filter @herald/bench limiter        (BENCH_SECONDS=3 by default per measurement)
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { RateLimiter, scriptSource } from '@herald/rate-limiter';
import { Redis } from 'ioredis';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const WARMUP_SECONDS = 0.5;
/** Calls in flight at once, for Herald, rate-limiter-flexible and redis-benchmark (-c) alike. */
const CONCURRENCY = 50;
/** redis-benchmark's pipelined run: commands per pipeline (-P). */
const PIPELINE = 16;
/** The normal path spreads calls over this many ids, each far from its limit: every call is allowed. */
const IDS = 10_000;
const NORMAL = { capacity: 1_000_000, ratePerSecond: 1_000_000 };

interface Row {
  name: string;
  ops: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
  note?: string;
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

/** Runs `op` from CONCURRENCY loops for `seconds`; latency per call includes client-side queueing. */
async function measure(name: string, op: (i: number) => Promise<unknown>, seconds = SECONDS): Promise<Row> {
  const run = async (durationS: number, record: boolean) => {
    let latencies = new Float64Array(1 << 20);
    let count = 0;
    let next = 0;
    const deadline = performance.now() + durationS * 1000;
    const started = performance.now();
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
    return {
      latencies: latencies.subarray(0, count).sort(),
      count,
      elapsedS: (performance.now() - started) / 1000,
    };
  };
  await run(WARMUP_SECONDS, false);
  const { latencies, count, elapsedS } = await run(seconds, true);
  return {
    name,
    ops: count,
    perSecond: count / elapsedS,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
  };
}

/** redis-benchmark running `args` (a command) with CONCURRENCY clients; its own rps and percentiles. */
function redisBenchmark(name: string, args: string[], requests: number, pipeline = 1): Row {
  const url = new URL(REDIS_URL);
  const cli = [
    '-h',
    url.hostname,
    '-p',
    url.port || '6379',
    ...(url.password ? ['-a', decodeURIComponent(url.password)] : []),
    '-c',
    String(CONCURRENCY),
    '-n',
    String(requests),
    '-r',
    String(IDS),
    '-P',
    String(pipeline),
    '--csv',
    ...args,
  ];
  const result = spawnSync('redis-benchmark', cli, { encoding: 'utf8', timeout: 60_000 });
  const line = result.stdout
    ?.trim()
    .split('\n')
    .find((l) => l.startsWith('"EVALSHA'));
  if (result.status !== 0 || line === undefined) {
    return {
      name,
      ops: 0,
      perSecond: Number.NaN,
      p50Ms: Number.NaN,
      p99Ms: Number.NaN,
      note: 'redis-benchmark failed',
    };
  }
  const fields = line.split('","').map((f) => f.replaceAll('"', ''));
  return {
    name,
    ops: requests,
    perSecond: Number(fields[1]),
    p50Ms: Number(fields[4]),
    p99Ms: Number(fields[6]),
  };
}

function connect(): Promise<Redis> {
  // The same client for both libraries. Auto-pipelining is off (ioredis's default): on this 2-core machine
  // it lowered Herald from ~53k to ~34k decisions/s and rate-limiter-flexible from ~63k to ~53k, because
  // Node and Redis then take turns on one batch instead of working side by side.
  const redis = new Redis(REDIS_URL, {
    enableAutoPipelining: false,
    enableOfflineQueue: false,
    autoResendUnfulfilledCommands: false,
    maxRetriesPerRequest: 1,
    lazyConnect: true,
  });
  return redis.connect().then(() => redis);
}

function fmt(n: number, digits = 0): string {
  return Number.isFinite(n)
    ? n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })
    : 'n/a';
}

async function main(): Promise<void> {
  const redis = await connect();
  const run = `bench:${randomBytes(4).toString('hex')}:`;
  const info = await redis.info('server');
  const redisVersion = /redis_version:(\S+)/.exec(info)?.[1] ?? '?';

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
  const consume = (limiter: RateLimiter, id: string) =>
    limiter.consume(id).then((r) => {
      if (r.source === 'fallback') fallbacks++;
      return r;
    });
  const rlfConsume = (limiter: RateLimiterRedis, id: string) =>
    limiter.consume(id).catch((r: unknown) => {
      if (!(r instanceof RateLimiterRes)) throw r;
      return r;
    });

  const rows: Row[] = [];
  const progress = (row: Row) => {
    rows.push(row);
    process.stderr.write(`  ${row.name}: ${fmt(row.perSecond)}/s\n`);
  };

  // Normal path: every call allowed, ids spread over IDS keys.
  process.stderr.write('normal path (allowed)\n');
  const tb = herald('token-bucket', 'tb', NORMAL.capacity, NORMAL.ratePerSecond);
  progress(await measure('Herald token bucket', (i) => consume(tb, ids[i % IDS]!)));
  const gcra = herald('gcra', 'gcra', NORMAL.capacity, NORMAL.ratePerSecond);
  progress(await measure('Herald GCRA', (i) => consume(gcra, ids[i % IDS]!)));
  const flexible = rlf('rlf', NORMAL.capacity, NORMAL.capacity / NORMAL.ratePerSecond);
  progress(
    await measure('rate-limiter-flexible RateLimiterRedis', (i) => rlfConsume(flexible, ids[i % IDS]!)),
  );
  const sha = (await redis.script('LOAD', scriptSource('token-bucket'))) as string;
  // KEYS[1], then ARGV: now ("" = Redis TIME), TTL margin ms, capacity, rate, cost.
  const evalsha = (key: string) => [
    'EVALSHA',
    sha,
    '1',
    key,
    '',
    '1000',
    String(NORMAL.capacity),
    String(NORMAL.ratePerSecond),
    '1',
  ];
  progress(
    redisBenchmark('redis-benchmark EVALSHA token bucket', evalsha(`${run}rb:{__rand_int__}`), 100_000),
  );
  progress(
    redisBenchmark(
      `redis-benchmark EVALSHA token bucket -P ${PIPELINE}`,
      evalsha(`${run}rb:{__rand_int__}`),
      400_000,
      PIPELINE,
    ),
  );

  // Hot key being denied: one id, capacity 1, 0.001/s, exhausted before the measurement.
  process.stderr.write('hot key (denied)\n');
  const hotTb = herald('token-bucket', 'hot-tb', 1, 0.001);
  await hotTb.consume('hot');
  progress(await measure('Herald token bucket, denied (deny cache)', () => consume(hotTb, 'hot')));
  const hotGcra = herald('gcra', 'hot-gcra', 1, 0.001);
  await hotGcra.consume('hot');
  progress(await measure('Herald GCRA, denied (deny cache)', () => consume(hotGcra, 'hot')));
  const hotRlf = rlf('hot-rlf', 1, 1000);
  await rlfConsume(hotRlf, 'hot');
  progress(await measure('rate-limiter-flexible, denied', () => rlfConsume(hotRlf, 'hot')));
  const hotRlfBlock = rlf('hot-rlf-block', 1, 1000, true);
  await rlfConsume(hotRlfBlock, 'hot');
  progress(
    await measure('rate-limiter-flexible, denied (inMemoryBlockOnConsumed)', () =>
      rlfConsume(hotRlfBlock, 'hot'),
    ),
  );
  const hotKey = `${run}rb-hot:{hot}`;
  await redis.evalsha(sha, 1, hotKey, '', '1000', '1', '0.001', '1');
  const denied = (key: string) => ['EVALSHA', sha, '1', key, '', '1000', '1', '0.001', '1'];
  progress(
    redisBenchmark(`redis-benchmark EVALSHA denied -P ${PIPELINE}`, denied(hotKey), 400_000, PIPELINE),
  );
  redis.disconnect();

  const by = (name: string) => rows.find((r) => r.name === name)?.perSecond ?? Number.NaN;
  const tbRate = by('Herald token bucket');
  const rlfRate = by('rate-limiter-flexible RateLimiterRedis');
  const ceiling = by(`redis-benchmark EVALSHA token bucket -P ${PIPELINE}`);
  const width = Math.max(...rows.map((r) => r.name.length));
  const lines = [
    `| ${'measurement'.padEnd(width)} | decisions/s | p50 ms | p99 ms | vs rate-limiter-flexible | vs EVALSHA -P ${PIPELINE} |`,
    `| ${'-'.repeat(width)} | ----------: | -----: | -----: | -----------------------: | -----------------: |`,
    ...rows.map(
      (r) =>
        `| ${r.name.padEnd(width)} | ${fmt(r.perSecond).padStart(11)} | ${fmt(r.p50Ms, 3).padStart(6)} | ${fmt(r.p99Ms, 3).padStart(6)} | ${`${fmt(r.perSecond / rlfRate, 2)}x`.padStart(24)} | ${`${fmt((100 * r.perSecond) / ceiling, 0)}%`.padStart(18)} |`,
    ),
  ];
  const hot = by('Herald token bucket, denied (deny cache)');
  const verdict = (ok: boolean) => (ok ? 'met' : 'MISSED');
  console.log(
    [
      '',
      `Herald rate limiter benchmark — ${new Date().toISOString()}`,
      `node ${process.version}, redis ${redisVersion} at ${new URL(REDIS_URL).host}, ${CONCURRENCY} calls in flight, ${SECONDS} s per measurement`,
      '',
      ...lines,
      '',
      `Herald token bucket / rate-limiter-flexible: ${fmt(tbRate / rlfRate, 2)}x (target >= 1.3x: ${verdict(tbRate / rlfRate >= 1.3)})`,
      `Herald token bucket / redis-benchmark EVALSHA -P ${PIPELINE}: ${fmt((100 * tbRate) / ceiling, 0)}% (target >= 60%: ${verdict(tbRate / ceiling >= 0.6)})`,
      `Herald denied hot key / normal path: ${fmt(hot / tbRate, 1)}x (target >= 10x: ${verdict(hot / tbRate >= 10)})`,
      `Fallback decisions during the run (should be 0): ${fallbacks}`,
    ].join('\n'),
  );
}

await main();
