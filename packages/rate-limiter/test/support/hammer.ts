// A child process of the concurrency tests: CALLERS concurrent callers consume 1 token each from one key,
// in a loop, for DURATION_MS after the parent writes "go" on stdin, then each until Redis denies it.
// Protocol on stdout, one JSON line each: {"ready":true,"dateNow":…} then {"admitted":…,"calls":…,"local":…}.
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { RateLimiter } from '../../src/index.js';

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined) throw new Error(`hammer: ${name} is not set`);
  return value;
};

const redis = new Redis(env('REDIS_URL'), {
  enableOfflineQueue: false,
  autoResendUnfulfilledCommands: false,
  maxRetriesPerRequest: 1,
  lazyConnect: true,
});
await redis.connect();
const limiter = new RateLimiter({
  redis,
  keyPrefix: env('KEY_PREFIX'),
  policies: [{ name: 'p', capacity: Number(env('CAPACITY')), ratePerSecond: Number(env('RATE')) }],
  // A loaded 2-core machine must not turn slow answers into fallbacks: this test is about Redis decisions.
  failure: { mode: 'throw', timeoutMs: 10_000 },
});
const callers = Number(env('CALLERS'));
const durationMs = Number(env('DURATION_MS'));

process.stdout.write(`${JSON.stringify({ ready: true, dateNow: Date.now() })}\n`);
await new Promise<void>((resolve) => {
  createInterface({ input: process.stdin }).once('line', () => resolve());
});

// The deadline is measured on the monotonic clock: the wall clock may be skewed by faketime.
const deadline = performance.now() + durationMs;
let admitted = 0;
let calls = 0;
let local = 0;
await Promise.all(
  Array.from({ length: callers }, async () => {
    for (;;) {
      const result = await limiter.consume('hot');
      calls++;
      if (result.allowed) admitted++;
      // Past the deadline a caller stops at its first denial from Redis (not the deny cache): the last
      // call of the run is then a denial, which leaves the bucket with less than one token whatever
      // pauses a loaded machine gave the callers before it (the parent's "at most 1 less").
      const now = performance.now();
      if (now >= deadline && ((!result.allowed && result.source === 'redis') || now >= deadline + 10_000))
        break;
      if (result.source === 'deny-cache') {
        local++;
        // Yield to the event loop: a locally denied call resolves without I/O.
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
  }),
);
process.stdout.write(`${JSON.stringify({ admitted, calls, local })}\n`);
redis.disconnect();
