import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * How many times each of `keys` was written with `SET`, read from the append-only files of the
 * redis-server whose data folder is `dir` (Redis 7: `appendonlydir/*.incr.aof`, plain RESP commands;
 * a script's writes are logged as the commands it ran). Valid while the AOF was never rewritten (a
 * rewrite folds the history into the base file): run the server with `--auto-aof-rewrite-percentage 0`.
 * For the rate limiter, one `SET` of a bucket is one decision that took from it, whether or not its
 * answer reached the caller.
 */
export function countSets(dir: string, keys: readonly string[]): Map<string, number> {
  const counts = new Map<string, number>(keys.map((key) => [key, 0]));
  const folder = join(dir, 'appendonlydir');
  for (const file of readdirSync(folder)
    .filter((name) => name.endsWith('.incr.aof'))
    .sort()) {
    forEachCommand(readFileSync(join(folder, file)), (name, key) => {
      const count = counts.get(key);
      if (count !== undefined && name.toString('latin1').toUpperCase() === 'SET') counts.set(key, count + 1);
    });
  }
  return counts;
}

const CR = 0x0d;

/** Calls `each` with every RESP command's name and first argument. */
function forEachCommand(aof: Buffer, each: (name: Buffer, key: string) => void): void {
  let at = 0;
  /** The integer after a `*` or `$` at `at`, moving past its CRLF. */
  const header = (marker: number): number => {
    if (aof[at] !== marker) throw new Error(`AOF: expected ${String.fromCharCode(marker)} at byte ${at}`);
    const end = aof.indexOf(CR, at);
    const value = Number(aof.toString('latin1', at + 1, end));
    at = end + 2;
    return value;
  };
  const bulk = (): Buffer => {
    const length = header(0x24); // $
    const value = aof.subarray(at, at + length);
    at += length + 2;
    return value;
  };
  while (at < aof.length) {
    const argc = header(0x2a); // *
    const name = bulk();
    const key = argc > 1 ? bulk().toString('utf8') : '';
    for (let i = 2; i < argc; i++) bulk();
    each(name, key);
  }
}
