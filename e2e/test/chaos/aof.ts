import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Every `SET` of each of `keys`, in order, with the value written, read from the append-only files of
 * the redis-server whose data folder is `dir` (Redis 7: `appendonlydir/*.incr.aof`, plain RESP
 * commands; a script's writes are logged as the commands it ran). Complete while the AOF was never
 * rewritten (a rewrite folds the history into the base file): run the server with
 * `--auto-aof-rewrite-percentage 0`. For the rate limiter, one `SET` of a bucket is one decision that
 * took from it, whether or not its answer reached the caller.
 */
export function setsOf(dir: string, keys: readonly string[]): Map<string, Buffer[]> {
  const sets = new Map<string, Buffer[]>(keys.map((key) => [key, []]));
  const folder = join(dir, 'appendonlydir');
  for (const file of readdirSync(folder)
    .filter((name) => name.endsWith('.incr.aof'))
    .sort(byNumber)) {
    forEachCommand(readFileSync(join(folder, file)), (argv) => {
      const [name, key, value] = argv;
      if (name?.toString('latin1').toUpperCase() !== 'SET' || key === undefined || value === undefined)
        return;
      sets.get(key.toString('utf8'))?.push(Buffer.from(value));
    });
  }
  return sets;
}

/** `appendonly.aof.<n>.incr.aof` in the order Redis wrote them. */
function byNumber(a: string, b: string): number {
  const n = (name: string) => Number(/\.(\d+)\.incr\.aof$/.exec(name)?.[1] ?? 0);
  return n(a) - n(b);
}

const CR = 0x0d;

/** Calls `each` with every RESP command's arguments (its name first). */
function forEachCommand(aof: Buffer, each: (argv: Buffer[]) => void): void {
  let at = 0;
  /** The integer after a `*` or `$` at `at`, moving past its CRLF. */
  const header = (marker: number): number => {
    if (aof[at] !== marker) throw new Error(`AOF: expected ${String.fromCharCode(marker)} at byte ${at}`);
    const end = aof.indexOf(CR, at);
    const value = Number(aof.toString('latin1', at + 1, end));
    at = end + 2;
    return value;
  };
  while (at < aof.length) {
    const argv: Buffer[] = new Array(header(0x2a)); // *
    for (let i = 0; i < argv.length; i++) {
      const length = header(0x24); // $
      argv[i] = aof.subarray(at, at + length);
      at += length + 2;
    }
    each(argv);
  }
}
