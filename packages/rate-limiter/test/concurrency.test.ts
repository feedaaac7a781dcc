import { type ChildProcess, spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { redisUrl, skewedClock } from '@herald/testing';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { RateLimiter } from '../src/index.js';
import { randomPrefix } from './support/redis.js';

// Exactness under concurrency: 4 OS processes x 100 concurrent callers on one key for 3 s.
//
// What "elapsed" means: the time on Redis's clock (TIME, read inside the script) between the first and
// the last admission. The test makes the first admission itself: just before the children start, it takes
// the whole capacity in one call, which writes `ts` = t0 (µs, Redis TIME) into the bucket. Every later
// admission rewrites `ts`; after the run `ts` = t1 is the Redis time of the last admission. The bucket
// starts that interval empty and never fills up again (the children drain it continuously), so no refill
// is lost to the capacity cap, and exactly:
//   admitted = capacity + rate x (t1 - t0) - tokens left at t1
// with 0 <= tokens left < 1: past the 3 s each caller stops at its first denial from Redis, so the run's
// last call is a denial, made after the last admission with less than one token there (a loaded
// machine may pause the callers, and the bucket fill, at any moment before it). Hence
//   capacity + rate x elapsed - 1 < admitted <= capacity + rate x elapsed.

const CAPACITY = 100;
const RATE = 100;
const PROCESSES = 4;
const CALLERS = 100;
const DURATION_MS = 3000;

const hammer = fileURLToPath(new URL('./support/hammer.ts', import.meta.url));
const tsxLoader = createRequire(import.meta.url).resolve('tsx');

interface Child {
  process: ChildProcess;
  lines: AsyncIterator<string>;
  output: string[];
}

function startChild(prefix: string, skew: string | undefined): Child {
  const node = [process.execPath, '--import', tsxLoader, hammer];
  const [command, ...args] = node;
  // Its wall clock off by `skew` (libfaketime), as on a machine without NTP.
  const child = spawn(command!, args, {
    env: {
      ...process.env,
      ...(skew === undefined ? {} : skewedClock(skew)),
      REDIS_URL: redisUrl(),
      KEY_PREFIX: prefix,
      CAPACITY: String(CAPACITY),
      RATE: String(RATE),
      CALLERS: String(CALLERS),
      DURATION_MS: String(DURATION_MS),
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  child.stderr?.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  return { process: child, lines, output };
}

async function nextJson<T>(child: Child): Promise<T> {
  const { value, done } = await child.lines.next();
  if (done) throw new Error(`child exited early:\n${child.output.join('')}`);
  return JSON.parse(value) as T;
}

/** The bucket as the scripts store it: struct '<Bddd' (format 2, microtokens, ts µs on Redis TIME, expiry µs). */
async function bucketState(redis: Redis, key: string): Promise<{ tokens: number; ts: number }> {
  const stored = await redis.getBuffer(key);
  if (stored === null || stored.length !== 25 || stored[0] !== 2) throw new Error(`no bucket at ${key}`);
  return { tokens: stored.readDoubleLE(1) / 1_000_000, ts: stored.readDoubleLE(9) };
}

async function run(skews: (string | undefined)[]) {
  const prefix = randomPrefix();
  const children = skews.map((skew) => startChild(prefix, skew));
  try {
    const ready = await Promise.all(children.map((c) => nextJson<{ dateNow: number }>(c)));
    const ourNow = Date.now();

    const admin = new Redis(redisUrl());
    try {
      const limiter = new RateLimiter({
        redis: admin,
        keyPrefix: prefix,
        policies: [{ name: 'p', capacity: CAPACITY, ratePerSecond: RATE }],
        denyCache: false,
      });
      const key = limiter.keyOf('p', 'hot');
      const first = await limiter.consume('hot', CAPACITY);
      expect(first.allowed).toBe(true);
      const t0 = (await bucketState(admin, key)).ts;
      for (const child of children) child.process.stdin?.write('go\n');

      const results = await Promise.all(
        children.map((c) => nextJson<{ admitted: number; calls: number; local: number }>(c)),
      );
      const { tokens: left, ts: t1 } = await bucketState(admin, key);
      const elapsedS = (t1 - t0) / 1e6;
      const admitted = CAPACITY + results.reduce((sum, r) => sum + r.admitted, 0);
      const bound = CAPACITY + RATE * elapsedS;
      return { ready, ourNow, results, admitted, bound, left, elapsedS };
    } finally {
      admin.disconnect();
    }
  } finally {
    for (const child of children) if (child.process.exitCode === null) child.process.kill();
  }
}

function expectExact(outcome: Awaited<ReturnType<typeof run>>) {
  const { admitted, bound, left, elapsedS, results } = outcome;
  const detail = JSON.stringify({ admitted, bound, left, elapsedS, results });
  // Every process took part, and the run lasted about the 3 s asked (on Redis's clock).
  for (const r of results) expect(r.admitted, detail).toBeGreaterThan(0);
  expect(elapsedS, detail).toBeGreaterThan(2);
  // Never above; at most 1 below (1e-6: the float sum of 3 s of refill).
  expect(admitted, detail).toBeLessThanOrEqual(bound + 1e-6);
  expect(admitted, detail).toBeGreaterThan(bound - 1);
  // The same identity read from the bucket itself: what is left is what was not admitted.
  expect(Math.abs(admitted - (bound - left)), detail).toBeLessThan(1e-6);
}

describe('exactness across processes', () => {
  it('4 processes x 100 callers for 3 s admit capacity + rate x elapsed, never more, at most 1 less', async () => {
    expectExact(await run([undefined, undefined, undefined, undefined]));
  });

  it('still exact with the processes wall clocks 30 s apart (faketime -30 s, -10 s, +10 s, +30 s)', async () => {
    const skewsS = [-30, -10, 10, 30];
    const outcome = await run(skewsS.map((s) => `${s >= 0 ? '+' : ''}${s}s`));
    // The children really see skewed clocks (a few seconds of start-up slack either way).
    outcome.ready.forEach((r, i) => {
      expect(Math.abs(r.dateNow - outcome.ourNow - skewsS[i]! * 1000)).toBeLessThan(5000);
    });
    expectExact(outcome);
  });
});
