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
  /** Redis `INFO memory` `used_memory`, bytes. */
  redisUsedMemory: number;
  /** Redis `DBSIZE`. */
  redisKeys: number;
  /** Keys that belong to one notification each: its marker hash and its id → user index (SCAN count). */
  notificationRecords: number;
  /** Their memory, estimated: their count × the mean `MEMORY USAGE` of a random 200 of them, bytes. */
  notificationRecordBytes: number;
}

const FIXED = ['t_s', 'accepted', 'shown'] as const;
const REDIS = [
  'redis_used_memory_bytes',
  'redis_keys',
  'redis_notification_records',
  'redis_notification_record_bytes',
] as const;

/** Writes `samples` as CSV, one row per sample, an `rss_<process>_bytes` column per process. */
export function writeSamples(path: URL | string, samples: readonly Sample[]): void {
  const processes = Object.keys(samples[0]?.rss ?? {});
  const header = [...FIXED, ...processes.map((name) => `rss_${name}_bytes`), ...REDIS];
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
    ].join(','),
  );
  writeFileSync(path, `${[header.join(','), ...rows].join('\n')}\n`);
}

/** Reads what {@link writeSamples} wrote. */
export function readSamples(path: URL | string): Sample[] {
  const [header = '', ...rows] = readFileSync(path, 'utf8').trim().split('\n');
  const columns = header.split(',');
  return rows.map((line) => {
    const cells = line.split(',').map(Number);
    const value = (name: string) => cells[columns.indexOf(name)] ?? Number.NaN;
    const rss: Record<string, number> = {};
    for (const name of columns) {
      const process = /^rss_(.+)_bytes$/.exec(name)?.[1];
      if (process) rss[process] = value(name);
    }
    return {
      t: value('t_s'),
      accepted: value('accepted'),
      shown: value('shown'),
      rss,
      redisUsedMemory: value('redis_used_memory_bytes'),
      redisKeys: value('redis_keys'),
      notificationRecords: value('redis_notification_records'),
      notificationRecordBytes: value('redis_notification_record_bytes'),
    };
  });
}
