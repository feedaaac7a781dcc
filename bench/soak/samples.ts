// The soak's samples (one every SOAK_SAMPLE_MS) and their CSV file, bench/soak/samples.csv.
import { readFileSync, writeFileSync } from 'node:fs';

/** One sample of the soak. */
export interface Sample {
  /** Seconds since the load started. */
  t: number;
  /** 202s so far (each in the ledger). */
  accepted: number;
  /** Notifications shown to the clients so far. */
  shown: number;
  /** Resident set size in bytes, by process (gateway, worker, realtime-a, realtime-b, redis-server). */
  rss: Record<string, number>;
  /**
   * The V8 heap of each Node app (from its `/metrics`), bytes: `total` what V8 has committed (part of the
   * RSS), `used` what objects take now (garbage not yet collected included).
   */
  heap: Record<string, { total: number; used: number }>;
  /**
   * The live V8 heap of each Node app, bytes: in use right after a full garbage collection (forced over
   * the inspector). Measured on the first 3 samples after warm-up and the last 3 only (a forced collection
   * gives memory back, which would move the RSS of the samples after it); NaN on the others.
   */
  live: Record<string, number>;
  /** Redis `INFO memory` `used_memory`, bytes. */
  redisUsedMemory: number;
  /** Redis `DBSIZE`. */
  redisKeys: number;
  /** Keys that belong to one notification each: its marker hash and its id → user index (SCAN count). */
  notificationRecords: number;
  /** Their memory, estimated: their count × the mean `MEMORY USAGE` of a random 200 of them, bytes. */
  notificationRecordBytes: number;
  /** Jobs BullMQ keeps once completed (`removeOnComplete`: the last 10,000, an hour): ZCARD of the completed set. */
  keptJobs: number;
  /** Their memory, estimated: their count × the mean `MEMORY USAGE` of a random 100 job hashes, bytes. */
  keptJobBytes: number;
}

const FIXED = ['t_s', 'accepted', 'shown'] as const;
const REDIS = [
  'redis_used_memory_bytes',
  'redis_keys',
  'redis_notification_records',
  'redis_notification_record_bytes',
  'redis_kept_jobs',
  'redis_kept_job_bytes',
] as const;

/**
 * Writes `samples` as CSV, one row per sample: an `rss_<process>_bytes` column per process, and
 * `heap_total_<app>_bytes`, `heap_used_<app>_bytes` per Node app.
 */
export function writeSamples(path: URL | string, samples: readonly Sample[]): void {
  const processes = Object.keys(samples[0]?.rss ?? {});
  const apps = Object.keys(samples[0]?.heap ?? {});
  const header = [
    ...FIXED,
    ...processes.map((name) => `rss_${name}_bytes`),
    ...REDIS,
    ...apps.flatMap((name) => [
      `heap_total_${name}_bytes`,
      `heap_used_${name}_bytes`,
      `heap_live_${name}_bytes`,
    ]),
  ];
  const rows = samples.map((s) =>
    [
      s.t,
      s.accepted,
      s.shown,
      ...processes.map((name) => s.rss[name] ?? ''),
      s.redisUsedMemory,
      s.redisKeys,
      s.notificationRecords,
      Math.round(s.notificationRecordBytes),
      s.keptJobs,
      Math.round(s.keptJobBytes),
      ...apps.flatMap((name) => [
        s.heap[name]?.total ?? '',
        s.heap[name]?.used ?? '',
        Number.isNaN(s.live[name] ?? Number.NaN) ? '' : s.live[name],
      ]),
    ].join(','),
  );
  writeFileSync(path, `${[header.join(','), ...rows].join('\n')}\n`);
}

/** Reads what {@link writeSamples} wrote. */
export function readSamples(path: URL | string): Sample[] {
  const [header = '', ...rows] = readFileSync(path, 'utf8').trim().split('\n');
  const columns = header.split(',');
  return rows.map((line) => {
    const cells = line.split(',').map((cell) => (cell === '' ? Number.NaN : Number(cell)));
    const value = (name: string) => cells[columns.indexOf(name)] ?? Number.NaN;
    const rss: Record<string, number> = {};
    const heap: Record<string, { total: number; used: number }> = {};
    const live: Record<string, number> = {};
    for (const name of columns) {
      const process = /^rss_(.+)_bytes$/.exec(name)?.[1];
      if (process) rss[process] = value(name);
      const app = /^heap_total_(.+)_bytes$/.exec(name)?.[1];
      if (app) {
        heap[app] = { total: value(name), used: value(`heap_used_${app}_bytes`) };
        live[app] = value(`heap_live_${app}_bytes`);
      }
    }
    return {
      t: value('t_s'),
      accepted: value('accepted'),
      shown: value('shown'),
      rss,
      heap,
      live,
      redisUsedMemory: value('redis_used_memory_bytes'),
      redisKeys: value('redis_keys'),
      notificationRecords: value('redis_notification_records'),
      notificationRecordBytes: value('redis_notification_record_bytes'),
      // Columns added later: an older file answers 0, not NaN.
      keptJobs: columns.includes('redis_kept_jobs') ? value('redis_kept_jobs') : 0,
      keptJobBytes: columns.includes('redis_kept_job_bytes') ? value('redis_kept_job_bytes') : 0,
    };
  });
}
