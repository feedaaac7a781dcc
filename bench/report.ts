// Writes a benchmark's figures into bench/README.md, between `<!-- bench:<name> -->` and
// `<!-- /bench:<name> -->`: the README is the report the benchmarks write (its history is git's).
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';

const README = new URL('./README.md', import.meta.url);

/**
 * Replaces section `name` of bench/README.md with `markdown`, stamped with the command and the time.
 * `BENCH_WRITE_README=0` leaves the README alone (a run to look at, not to report).
 */
export function writeReport(
  name:
    | 'limiter'
    | 'gateway'
    | 'delivery'
    | 'soak'
    | 'memory'
    | 'fanout'
    | 'cost'
    | 'cluster'
    | 'inbox-append',
  markdown: string,
): void {
  if (process.env.BENCH_WRITE_README === '0') return;
  const open = `<!-- bench:${name} -->`;
  const close = `<!-- /bench:${name} -->`;
  const text = readFileSync(README, 'utf8');
  const start = text.indexOf(open);
  const end = text.indexOf(close);
  if (start < 0 || end < start) throw new Error(`bench/README.md has no ${open} … ${close} section`);
  const stamp = `_Written by \`npx pnpm@12.4.2 bench:${name}\` on ${new Date().toISOString()}._`;
  writeFileSync(
    README,
    `${text.slice(0, start + open.length)}\n${stamp}\n\n${markdown.trim()}\n${text.slice(end)}`,
  );
}

/** The short commit of a checkout (a `BENCH_BASELINE`), for a report. */
export function commitOf(dir: string): string {
  try {
    return execFileSync('git', ['-C', dir, 'log', '-1', '--format=%h'], { encoding: 'utf8' }).trim();
  } catch {
    return dir;
  }
}
