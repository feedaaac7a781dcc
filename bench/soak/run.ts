// Soak: the chaos suite's stack (gateway, worker and two realtime instances, each its own OS process, on
// a private redis-server) under the chaos suite's load (an Idempotency-Key per request, every 202 in a
// ledger) and clients (real socket.io-clients recording what they are shown), for 10 minutes at a rate
// well inside what the stack carries here (bench:delivery). Every SOAK_SAMPLE_MS: the RSS of each process, Redis used_memory,
// DBSIZE and the keys that belong to one notification each. After warm-up every series must be flat
// (< 10 % growth), no process may log an error, the ledger must be exact, and the stack must keep up
// (at least 95 % of the offered rate accepted after warm-up: else what grows is a backlog, not a leak).
//
// Usage: pnpm bench:soak   (root; builds the apps first)
// Env:   SOAK_PER_SECOND (500), SOAK_MS (600000), SOAK_SAMPLE_MS (10000), SOAK_WARMUP_MS (240000),
//        SOAK_USERS (200); BENCH_WRITE_README=0 leaves bench/README.md alone.
import { readFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { ChaosStack, connectUsers, drainAndCheck, pause } from '@herald/e2e/chaos';
import { DEFAULT_QUEUE_PREFIX, envelopeJobOptions } from '@herald/protocol';
import type { AppProcess } from '@herald/testing';
import { Redis } from 'ioredis';
import WebSocket from 'ws';
import { writeReport } from '../report.js';
import { plotSvg, REPORTED, soakTitle, writePlot } from './plot.js';
import { type Sample, writeSamples } from './samples.js';

/**
 * Well inside what the stack carries on 2 shared cores: 750/s kept up on one machine (2 × Xeon,
 * 2026-12-03) and not on another (2 × EPYC, the same day: 586/s accepted, requests queued for minutes
 * in the load's client, Redis memory growing with the backlog).
 */
const PER_SECOND = Number(process.env.SOAK_PER_SECOND ?? 500);
/** Least share of the offered rate accepted after warm-up for the run to count. */
const KEPT_UP = 0.95;
const SOAK_MS = Number(process.env.SOAK_MS ?? 600_000);
const SAMPLE_MS = Number(process.env.SOAK_SAMPLE_MS ?? 10_000);
// 4 minutes: BullMQ keeps the last 10,000 completed jobs, and at 500/s with the default envelopes (20 ms,
// ~10 notifications each) those fill in ~200 s. Their bytes follow the envelopes' fill, which follows the
// machine's load: they are a series of their own (kept jobs), bounded by count, not part of "the rest".
const WARMUP_MS = Number(process.env.SOAK_WARMUP_MS ?? 240_000);
const USERS = Number(process.env.SOAK_USERS ?? 200);
/** Completed jobs BullMQ keeps per queue (`removeOnComplete.count` of an envelope and of a job of its own). */
const KEPT_JOBS = envelopeJobOptions('').removeOnComplete.count;
/** Most a series may grow from the start of the measured span to its end. */
const FLAT = 0.1;

/**
 * Settings that let every bounded structure reach its bound well within the warm-up, so that what still
 * grows after it is a finding, not a queue filling up. At 500/s over 200 users (2.5/s each):
 */
const SOAK_ENV: Record<string, string> = {
  // Each inbox stream is trimmed to its last 50 entries, or its last 30 s, whichever is fewer: full
  // after 20 s (the defaults, 1,000 entries or 30 days, would take 6.7 minutes at 2.5/s).
  HERALD_INBOX_MAX_LENGTH: '50',
  HERALD_INBOX_MAX_AGE_MS: '30000',
  // A notification's marker and id index live 30 s + 60 s (default 30 days + 1 day): 45,000 of each at
  // 500/s, reached after 90 s.
  HERALD_INBOX_RECORD_GRACE_MS: '60000',
  // Idempotency records live 60 s (the least the gateway takes; default a day): 30,000 at 500/s, reached
  // after 60 s. BullMQ keeps the last 10,000 completed jobs (envelopes: see WARMUP_MS): ~100 s.
  HERALD_IDEMPOTENCY_TTL_SECONDS: '60',
};

/** Notifications accepted per second from the end of the warm-up to the last sample. */
function acceptedRate(samples: readonly Sample[]): number {
  const first = samples.find((s) => s.t * 1000 >= WARMUP_MS);
  const last = samples.at(-1);
  return last && first && last.t > first.t
    ? (last.accepted - first.accepted) / (last.t - first.t)
    : Number.NaN;
}

async function main(): Promise<void> {
  const startedAt = Date.now();
  // Persistence as infra/redis/redis.conf ships it (append-only, fsync every second), not the chaos
  // suite's fsync always, which a Redis stopped mid-scenario needs and a soak does not.
  const stack = await ChaosStack.create({
    // Each app opens its inspector (loopback, a free port): the soak forces a full garbage collection
    // through it to read the live heap (see liveHeap).
    env: { ...SOAK_ENV, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --inspect=127.0.0.1:0`.trim() },
    redisArgs: ['--appendonly', 'yes', '--appendfsync', 'everysec'],
  });
  const redis = new Redis(stack.redis.url, { maxRetriesPerRequest: 1 });
  try {
    const [gateway, worker, realtimeA, realtimeB] = await Promise.all([
      stack.start('gateway'),
      stack.start('worker'),
      stack.start('realtime'),
      stack.start('realtime'),
    ]);
    const processes: Record<string, number | undefined> = {
      gateway: gateway.process.pid,
      worker: worker.process.pid,
      'realtime-a': realtimeA.process.pid,
      'realtime-b': realtimeB.process.pid,
      'redis-server': stack.redis.process.pid,
    };
    const apps = { gateway, worker, 'realtime-a': realtimeA, 'realtime-b': realtimeB };
    const { users, clients } = await connectUsers(stack, USERS);
    process.stderr.write(`[soak] ${USERS} clients synced; ${PER_SECOND}/s for ${SOAK_MS / 1000} s\n`);

    // At most 256 attempts in flight: 750/s answered within 0.3 s fits; a starved sender queues instead
    // of opening a socket per late request.
    const load = stack.load(users, PER_SECOND, { maxInFlight: 256 });
    const loadAt = Date.now();
    load.start();
    const samples: Sample[] = [];
    const prefix = stack.env.HERALD_INBOX_PREFIX ?? '';
    const queueKey = `${stack.env.HERALD_QUEUE_PREFIX ?? DEFAULT_QUEUE_PREFIX}:${stack.env.HERALD_QUEUE_NAME}`;
    // A sample every SAMPLE_MS on the load's clock; a slot missed (this process starved on a loaded
    // machine) is skipped, not caught up with samples a few ms apart.
    for (
      let k = 0;
      k * SAMPLE_MS <= SOAK_MS;
      k = Math.max(k + 1, Math.ceil((Date.now() - loadAt) / SAMPLE_MS))
    ) {
      await pause(loadAt + k * SAMPLE_MS - Date.now());
      const t = Math.round((Date.now() - loadAt) / 100) / 10;
      const rss = Object.fromEntries(Object.entries(processes).map(([name, pid]) => [name, rssBytes(pid)]));
      const [info, keys, records, kept, heaps] = await Promise.all([
        redis.info('memory'),
        redis.dbsize(),
        notificationRecords(redis, prefix),
        keptJobs(redis, queueKey),
        Promise.all(Object.entries(apps).map(async ([name, app]) => [name, await v8Heap(app.url)] as const)),
      ]);
      // The live heap on the first 3 samples after warm-up and the last 3 (after the RSS was read).
      const measured = samples.filter((s) => s.t * 1000 >= WARMUP_MS).length;
      const edge = (t * 1000 >= WARMUP_MS && measured < 3) || (k + 3) * SAMPLE_MS > SOAK_MS;
      const live = Object.fromEntries(
        await Promise.all(
          Object.entries(apps).map(
            async ([name, app]) => [name, edge ? await liveHeap(app) : Number.NaN] as const,
          ),
        ),
      );
      samples.push({
        t,
        accepted: load.counts.accepted,
        shown: clients.reduce((n, client) => n + client.shown.length, 0),
        rss,
        heap: Object.fromEntries(heaps),
        live,
        redisUsedMemory: Number(/used_memory:(\d+)/.exec(info)?.[1] ?? Number.NaN),
        redisKeys: keys,
        notificationRecords: records.count,
        notificationRecordBytes: records.bytes,
        keptJobs: kept.count,
        keptJobBytes: kept.bytes,
      });
      process.stderr.write(`[soak] ${describe(samples.at(-1) as Sample)}\n`);
    }
    const result = await drainAndCheck(load, clients, {
      scenario: 'soak',
      faultEndAt: Date.now(),
      drainMs: 60_000,
    });
    const requests = {
      sent: load.sent,
      abandoned: load.abandoned,
      refused: load.counts.other,
      requestTimeouts: load.counts.requestTimeouts,
    };
    const errors = Object.entries(apps).map(([name, app]) => logLevels(name, app));

    // A run not to report (BENCH_WRITE_README=0) leaves the reported samples and plot alone too.
    const aside = (path: string) => join(tmpdir(), basename(path));
    const files =
      process.env.BENCH_WRITE_README === '0'
        ? { samples: aside(REPORTED.samples), svg: aside(REPORTED.svg), png: aside(REPORTED.png) }
        : REPORTED;
    writeSamples(files.samples, samples);
    const title = soakTitle({ perSecond: PER_SECOND, ms: SOAK_MS, users: USERS, at: new Date() });
    await writePlot(plotSvg(samples, { warmupS: WARMUP_MS / 1000, title }), files);
    process.stderr.write(`[soak] samples: ${files.samples}; plot: ${files.svg}, ${files.png}\n`);
    const { report, detail } = markdown({
      samples,
      result,
      requests,
      errors,
      elapsedMs: Date.now() - startedAt,
    });
    process.stdout.write(`${report}\n\n${detail}\n`);
    writeReport('soak', report);
    const bad =
      result.missing + result.duplicates + result.outOfOrder + result.unexpected + requests.refused > 0 ||
      errors.some((e) => e.errors > 0) ||
      series(samples).some((s) => s.verdict === 'grows') ||
      !(acceptedRate(samples) >= KEPT_UP * PER_SECOND);
    if (bad) process.exitCode = 1;
  } finally {
    redis.disconnect();
    await stack.dispose();
  }
}

/** The V8 heap of the app at `url`, from prom-client's default metrics on its `/metrics` (NaN if unanswered). */
async function v8Heap(url: string): Promise<{ total: number; used: number }> {
  const text = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(5000) })
    .then((response) => response.text())
    .catch(() => '');
  const metric = (name: string) =>
    Number(new RegExp(`^\\w*_nodejs_heap_size_${name}_bytes (\\d+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
  return { total: metric('total'), used: metric('used') };
}

/**
 * The live V8 heap of `app` (started with `--inspect`), bytes: over the Chrome DevTools Protocol, a full
 * garbage collection (`HeapProfiler.collectGarbage`), then `Runtime.getHeapUsage`. NaN if it fails.
 */
async function liveHeap(app: AppProcess): Promise<number> {
  const url = app.lines.map((line) => /Debugger listening on (ws:\/\/\S+)/.exec(line)?.[1]).find(Boolean);
  if (url === undefined) return Number.NaN;
  const socket = new WebSocket(url);
  try {
    await new Promise((resolve, reject) => {
      socket.once('open', resolve);
      socket.once('error', reject);
    });
    const call = (id: number, method: string) =>
      new Promise<Record<string, unknown>>((resolve, reject) => {
        const onMessage = (data: WebSocket.RawData) => {
          const message = JSON.parse(String(data)) as { id?: number; result?: Record<string, unknown> };
          if (message.id !== id) return;
          socket.off('message', onMessage);
          if (message.result) resolve(message.result);
          else reject(new Error(`${method} failed`));
        };
        socket.on('message', onMessage);
        socket.send(JSON.stringify({ id, method }));
      });
    const usage = await Promise.race([
      call(1, 'HeapProfiler.collectGarbage').then(() => call(2, 'Runtime.getHeapUsage')),
      pause(15_000).then((): Record<string, unknown> => ({})),
    ]);
    return Number(usage.usedSize ?? Number.NaN);
  } catch {
    return Number.NaN;
  } finally {
    socket.close();
  }
}

/** VmRSS of `pid` from /proc, in bytes (NaN when it is gone or this is not Linux). */
function rssBytes(pid: number | undefined): number {
  try {
    const kb = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb === undefined ? Number.NaN : Number(kb) * 1024;
  } catch {
    return Number.NaN;
  }
}

/**
 * The keys of one notification each, by a SCAN of the whole keyspace: its marker hash
 * (`<prefix>{<user>}:n:<id>`, or `<prefix>n:{<slot tag>}:<id>` for a routed id, which needs no index) and
 * its id → user index (`<prefix>id:{<id>}`), both kept for the inbox
 * retention (HERALD_INBOX_MAX_AGE_MS + HERALD_INBOX_RECORD_GRACE_MS) whether or not the entry is still in the stream; and an
 * estimate of their memory: their count × the mean `MEMORY USAGE` of 200 of them picked at random.
 */
async function notificationRecords(redis: Redis, prefix: string): Promise<{ count: number; bytes: number }> {
  let count = 0;
  const picked: string[] = [];
  for await (const keys of redis.scanStream({ count: 5000 }) as AsyncIterable<string[]>) {
    for (const key of keys) {
      if (!key.startsWith(prefix)) continue;
      const rest = key.slice(prefix.length);
      if (!rest.startsWith('id:{') && !rest.startsWith('n:{') && !/^\{[^}]*\}:n:/.test(rest)) continue;
      count++;
      // Reservoir sampling: every record has the same chance to be one of the 200.
      if (picked.length < 200) picked.push(key);
      else {
        const at = Math.floor(Math.random() * count);
        if (at < 200) picked[at] = key;
      }
    }
  }
  return { count, bytes: await estimatedBytes(redis, count, picked) };
}

/**
 * `count` keys' memory estimated from a sample of them: `count` × the mean `MEMORY USAGE` of `sample`.
 * A key gone between the pick and its read answers null and is left out of the mean.
 */
async function estimatedBytes(redis: Redis, count: number, sample: readonly string[]): Promise<number> {
  const pipeline = redis.pipeline();
  for (const key of sample) pipeline.memory('USAGE', key, 'SAMPLES', '0');
  const sizes = ((await pipeline.exec()) ?? [])
    .map(([, size]) => Number(size ?? 0))
    .filter((size) => size > 0);
  return sizes.length > 0 ? (count * sizes.reduce((a, b) => a + b, 0)) / sizes.length : 0;
}

/**
 * The jobs BullMQ keeps once completed under `queueKey` (`<prefix>:<name>`; `removeOnComplete` keeps the
 * last 10,000 for an hour: envelopes, and notifications with a job of their own) and an estimate of their
 * memory: their count × the mean `MEMORY USAGE` of 100 of them picked at random. Their count reaches its
 * bound; their bytes follow how many notifications each envelope carries, which follows the load.
 */
async function keptJobs(redis: Redis, queueKey: string): Promise<{ count: number; bytes: number }> {
  const count = await redis.zcard(`${queueKey}:completed`);
  if (count === 0) return { count, bytes: 0 };
  const ids = (await redis.zrandmember(`${queueKey}:completed`, 100)) as string[];
  return {
    count,
    bytes: await estimatedBytes(
      redis,
      count,
      ids.map((id) => `${queueKey}:${id}`),
    ),
  };
}

/** Log lines of `app` at error level or above (pino: 50 error, 60 fatal) and at warn (40). */
function logLevels(
  name: string,
  app: AppProcess,
): { name: string; errors: number; warnings: number; first: string[]; warned: Map<string, number> } {
  let errors = 0;
  let warnings = 0;
  const first: string[] = [];
  const warned = new Map<string, number>();
  for (const text of app.lines) {
    if (!text.startsWith('{')) continue;
    let entry: { level?: number; msg?: string };
    try {
      entry = JSON.parse(text) as { level?: number; msg?: string };
    } catch {
      continue;
    }
    const level = Number(entry.level ?? 0);
    if (level >= 50) {
      errors++;
      if (first.length < 3) first.push(text.slice(0, 300));
    } else if (level === 40) {
      warnings++;
      warned.set(entry.msg ?? '?', (warned.get(entry.msg ?? '?') ?? 0) + 1);
    }
  }
  return { name, errors, warnings, first, warned };
}

interface Growth {
  name: string;
  unit: 'MB' | 'keys';
  start: number;
  end: number;
  growth: number;
  verdict: 'flat' | 'grows' | 'grows by design' | 'within its bound' | 'V8 heap sizing';
}

/**
 * Each series' level at the start of the measured span (after warm-up) and at its end, each the median
 * of three samples (a garbage collection just before one sample does not decide), and the growth.
 * A Node app's RSS is split in two: what lies outside its V8 heap (code, buffers, native state) and the
 * live V8 heap (in use after a full collection, read on those 3 + 3 samples). V8 sizes the heap it commits (its young generation above all) to the allocation rate, so a
 * busy process's RSS climbs back to its working size after a collection gave memory back, without a
 * leak: an RSS that grows while both parts stay flat is marked `V8 heap sizing`, not `grows`.
 */
function series(samples: readonly Sample[]): Growth[] {
  const after = samples.filter((s) => s.t * 1000 >= WARMUP_MS);
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
  const measure = (
    name: string,
    unit: Growth['unit'],
    pick: (s: Sample) => number,
    options: { byDesign?: boolean; bound?: number } = {},
  ): Growth => {
    const start = median(after.slice(0, 3).map(pick));
    const end = median(after.slice(-3).map(pick));
    const growth = start > 0 ? (end - start) / start : Number.NaN;
    const verdict =
      growth < FLAT
        ? 'flat'
        : options.bound !== undefined && end <= options.bound
          ? 'within its bound'
          : options.byDesign
            ? 'grows by design'
            : 'grows';
    return { name, unit, start, end, growth, verdict };
  };
  const mb = (bytes: number) => bytes / 2 ** 20;
  const processes = Object.keys(samples[0]?.rss ?? {}).flatMap((name) => {
    const rss = measure(`RSS ${name}`, 'MB', (s) => mb(s.rss[name] ?? Number.NaN));
    if (samples[0]?.heap[name] === undefined) return [rss];
    const heap = (s: Sample) => s.heap[name] ?? { total: Number.NaN, used: Number.NaN };
    const outside = measure('  of which outside the V8 heap', 'MB', (s) =>
      mb((s.rss[name] ?? Number.NaN) - heap(s).total),
    );
    const live = measure('  V8 heap live (after a full collection)', 'MB', (s) =>
      mb(s.live[name] ?? Number.NaN),
    );
    const sized = rss.verdict === 'grows' && outside.verdict === 'flat' && live.verdict === 'flat';
    return [{ ...rss, verdict: sized ? ('V8 heap sizing' as const) : rss.verdict }, outside, live];
  });
  return [
    ...processes,
    measure('Redis used_memory', 'MB', (s) => mb(s.redisUsedMemory)),
    measure('  of which per-notification records (estimate)', 'MB', (s) => mb(s.notificationRecordBytes), {
      byDesign: true,
    }),
    measure('  of which completed jobs kept by BullMQ (estimate)', 'MB', (s) => mb(s.keptJobBytes), {
      byDesign: true,
    }),
    measure('  of which the rest', 'MB', (s) =>
      mb(s.redisUsedMemory - s.notificationRecordBytes - s.keptJobBytes),
    ),
    measure('Redis keys (DBSIZE)', 'keys', (s) => s.redisKeys),
    measure('  of which per-notification records', 'keys', (s) => s.notificationRecords, { byDesign: true }),
    // Filling up to BullMQ's bound (removeOnComplete), which it never passes.
    measure('  of which completed jobs kept by BullMQ', 'keys', (s) => s.keptJobs, { bound: KEPT_JOBS }),
    measure('  of which all other keys', 'keys', (s) => s.redisKeys - s.notificationRecords - s.keptJobs),
  ];
}

function describe(s: Sample): string {
  const mb = (bytes: number | undefined) => ((bytes ?? 0) / 2 ** 20).toFixed(0);
  const rss = Object.entries(s.rss)
    .map(([name, bytes]) => `${name} ${mb(bytes)}`)
    .join(' ');
  return `t=${s.t}s accepted=${s.accepted} shown=${s.shown} rss MB: ${rss}; redis ${mb(s.redisUsedMemory)} MB, ${s.redisKeys} keys (${s.notificationRecords} notification records)`;
}

function markdown(options: {
  samples: readonly Sample[];
  result: Awaited<ReturnType<typeof drainAndCheck>>;
  requests: { sent: number; abandoned: number; refused: number; requestTimeouts: number };
  errors: ReturnType<typeof logLevels>[];
  elapsedMs: number;
}): { report: string; detail: string } {
  const { samples, result, requests, errors } = options;
  const growths = series(samples);
  const format = (g: Growth, value: number) =>
    g.unit === 'MB' ? value.toFixed(1) : String(Math.round(value));
  const mark = {
    flat: '✓ flat',
    grows: '✗ grows',
    'grows by design': 'grows (retention, see below)',
    'within its bound': `✓ within its bound (${KEPT_JOBS.toLocaleString('en-US')})`,
    'V8 heap sizing': '✓ V8 heap sizing (its parts are flat)',
  };
  const first = samples.find((s) => s.t * 1000 >= WARMUP_MS);
  const last = samples.at(-1);
  // Redis bytes one notification keeps for the retention (its marker and index, 2 records).
  const perNotification =
    last && last.notificationRecords > 0
      ? (2 * last.notificationRecordBytes) / last.notificationRecords
      : Number.NaN;
  const rate = acceptedRate(samples);
  const keptUp = rate >= KEPT_UP * PER_SECOND;
  const lines = [
    `machine: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, node ${process.version}, load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')} at the end`,
    `run: ${PER_SECOND}/s offered for ${SOAK_MS / 1000} s (${rate.toFixed(1)}/s accepted after warm-up), ${USERS} clients over 2 realtime instances, 1 worker, 1 gateway, a sample every ${SAMPLE_MS / 1000} s, warm-up ${WARMUP_MS / 1000} s; ${Math.round(options.elapsedMs / 1000)} s in all`,
    `settings: ${Object.entries(SOAK_ENV)
      .map(([name, value]) => `${name}=${value}`)
      .join(', ')} (on top of the chaos suite's)`,
    keptUp
      ? `kept up: ${((100 * rate) / PER_SECOND).toFixed(0)} % of the offered rate accepted after warm-up (at least ${KEPT_UP * 100} %)`
      : `✗ did not keep up: ${((100 * rate) / PER_SECOND).toFixed(0)} % of the offered rate accepted after warm-up (at least ${KEPT_UP * 100} %): requests queued in the load's client, so what grows below is a backlog, not a leak; run it with a lower SOAK_PER_SECOND`,
    '',
    `| series | after warm-up (t = ${first?.t ?? '?'} s) | at the end (t = ${last?.t ?? '?'} s) | growth | < 10 % |`,
    '| --- | --: | --: | --: | --- |',
    ...growths.map(
      (g) =>
        `| ${g.name} | ${format(g, g.start)} ${g.unit} | ${format(g, g.end)} ${g.unit} | ${(g.growth * 100).toFixed(1)} % | ${mark[g.verdict]} |`,
    ),
    '',
    `A notification keeps ${Math.round(perNotification)} B of Redis (its marker hash and id index, \`MEMORY USAGE\`) for the inbox retention, HERALD_INBOX_MAX_AGE_MS + HERALD_INBOX_RECORD_GRACE_MS, even once trimmed from its inbox: at this rate and the defaults (30 days + 1 day), ${((rate * 31 * 86_400 * perNotification) / 2 ** 30).toFixed(0)} GB before the first expires.`,
    ...(last && last.keptJobs > 0
      ? [
          '',
          `BullMQ keeps the last ${KEPT_JOBS.toLocaleString('en-US')} completed jobs (an hour at most, \`removeOnComplete\`): ${(last.keptJobBytes / 2 ** 20).toFixed(1)} MB at the end, ${Math.round(last.keptJobBytes / last.keptJobs)} B per job. Their number stops at the bound; their bytes follow how many notifications each envelope carries (more on a busier or slower machine, at most HERALD_ENVELOPE_MAX_ITEMS), so they are weighed apart from the rest.`,
        ]
      : []),
    '',
    '| ledger | accepted | shown | missing | duplicates | out of order | not accepted | refused | 503s | 409s | 408s | conn errors |',
    '| --- | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: |',
    `| soak | ${result.accepted} | ${result.shown} | ${result.missing} | ${result.duplicates} | ${result.outOfOrder} | ${result.unexpected} | ${requests.refused} | ${result.unavailable} | ${result.inFlight} | ${requests.requestTimeouts} | ${result.connectionErrors} |`,
    '',
    `errors logged (pino level ≥ 50): ${errors.map((e) => `${e.name} ${e.errors}`).join(', ')}; warnings (40): ${errors.map((e) => `${e.name} ${e.warnings}`).join(', ')}`,
    ...errors.flatMap((e) => e.first.map((text) => `    ${e.name}: ${text}`)),
    '',
    '![RSS per process, Redis memory and keys over the soak](../docs/soak.svg)',
  ];
  // To the terminal only: the requests' totals (the ledger above counts what matters) and each warning.
  const detail = [
    `requests sent ${requests.sent}, given up after the 60 s stop deadline ${requests.abandoned}, longest 202 wait ${result.maxAcceptMs} ms${result.refusals.length > 0 ? `; refused (first ${result.refusals.length}): ${result.refusals.join('; ')}` : ''}${result.missing > 0 ? `; first missing: ${result.missingIds.join(', ')}` : ''}`,
    // Each warning once, with the processes that logged it.
    ...[...new Set(errors.flatMap((e) => [...e.warned.keys()]))].map(
      (msg) =>
        `- "${msg.slice(0, 160)}": ${errors
          .filter((e) => e.warned.has(msg))
          .map((e) => `${e.name} ${e.warned.get(msg)}×`)
          .join(', ')}`,
    ),
  ];
  return { report: lines.join('\n'), detail: detail.join('\n') };
}

await main();
