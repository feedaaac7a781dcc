// What the benchmarks read of a Redis node: its CPU (INFO cpu) and its time inside each command
// (INFO commandstats), and the table that compares the latter between runs.
import type { Redis } from 'ioredis';

/** Calls and µs inside one command, as INFO commandstats counts them. */
export interface CommandStat {
  calls: number;
  usec: number;
}

/** Redis's CPU so far (used_cpu_sys + used_cpu_user of INFO cpu), µs. */
export async function redisCpuMicros(admin: Redis): Promise<number> {
  const info = await admin.info('cpu');
  const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? 0);
  return (field('used_cpu_sys') + field('used_cpu_user')) * 1e6;
}

/** Redis's socket work so far (INFO stats): reads and writes of client sockets, bytes in and out. */
export async function redisIo(admin: Redis): Promise<number[]> {
  const info = await admin.info('stats');
  return [
    'total_reads_processed',
    'total_writes_processed',
    'total_net_input_bytes',
    'total_net_output_bytes',
  ].map((name) => Number(new RegExp(`^${name}:(\\d+)`, 'm').exec(info)?.[1] ?? 0));
}

/** INFO commandstats: command → calls and µs spent inside it since the start (a script's µs include its commands'). */
export async function commandstats(admin: Redis): Promise<Map<string, CommandStat>> {
  const stats = new Map<string, CommandStat>();
  for (const match of (await admin.info('commandstats')).matchAll(
    /^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm,
  )) {
    stats.set(match[1] ?? '?', { calls: Number(match[2]), usec: Number(match[3]) });
  }
  return stats;
}

/** Adds `after - before` (two {@link commandstats} reads) into `sum`. */
export function addCommandstats(
  sum: Map<string, CommandStat>,
  before: Map<string, CommandStat>,
  after: Map<string, CommandStat>,
): void {
  for (const [name, stat] of after) {
    const was = before.get(name) ?? { calls: 0, usec: 0 };
    const into = sum.get(name) ?? { calls: 0, usec: 0 };
    into.calls += stat.calls - was.calls;
    into.usec += stat.usec - was.usec;
    sum.set(name, into);
  }
}

/**
 * Time inside Redis commands (INFO commandstats, no SLOWLOG cost), calls and µs per notification, the
 * top `top` of any column; the rest of INFO cpu is reading and writing the clients' sockets and the
 * server's own background work.
 */
export function commandstatsTable(
  columns: { label: string; stats: Map<string, CommandStat>; accepted: number }[],
  top = 12,
): string[] {
  const per = (column: (typeof columns)[number], name: string) => {
    const stat = column.stats.get(name) ?? { calls: 0, usec: 0 };
    const n = Math.max(1, column.accepted);
    return { calls: stat.calls / n, usec: stat.usec / n };
  };
  const names = new Set<string>();
  for (const column of columns) {
    for (const [name] of [...column.stats].sort((a, b) => b[1].usec - a[1].usec).slice(0, top))
      names.add(name);
  }
  const first = columns[0];
  const rows = first ? [...names].sort((a, b) => per(first, b).usec - per(first, a).usec) : [];
  // Inside scripts' calls are counted twice (in the script and in their own row): the commands the
  // clients sent are the scripts plus what no script calls.
  const scripts = (column: (typeof columns)[number]) =>
    [...column.stats.keys()].filter((name) => /^(evalsha|eval|fcall)/.test(name));
  const total = (column: (typeof columns)[number], field: 'calls' | 'usec') =>
    scripts(column).reduce((sum, name) => sum + per(column, name)[field], 0);
  return [
    "Redis inside commands (INFO commandstats over the measured rounds; a script's µs include the commands it calls, which have their own rows too):",
    '',
    `| command | ${columns.map((column) => `${column.label} calls / µs per notification`).join(' | ')} |`,
    `| --- | ${columns.map(() => '--:').join(' | ')} |`,
    `| all scripts | ${columns.map((column) => `${total(column, 'calls').toFixed(2)} / ${total(column, 'usec').toFixed(1)}`).join(' | ')} |`,
    ...rows.map(
      (name) =>
        `| ${name} | ${columns.map((column) => `${per(column, name).calls.toFixed(2)} / ${per(column, name).usec.toFixed(1)}`).join(' | ')} |`,
    ),
    '',
  ];
}

/** The median of `values` (the mean of the middle two for an even count). */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}
