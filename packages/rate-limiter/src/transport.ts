import type { Writable } from 'node:stream';
import type { PreparedCall } from './call.js';
import type { FailureReason } from './errors.js';
import type { Policy } from './options.js';

/**
 * Why a call got no answer from Redis; the failure mode decides it. A value, not an error: the hot path
 * of an outage must not build stack traces.
 */
export class Unavailable {
  constructor(
    readonly reason: FailureReason,
    readonly cause?: unknown,
    /** On a timeout after the script was sent: its reply, whenever Redis gives it (it may still run). */
    readonly late?: Promise<number[]>,
  ) {}
}

/** What {@link withLateTimeout} rejects with: the time is up, and the script's reply may still come. */
export class TimedOut {
  constructor(readonly late: Promise<number[]>) {}
}

/** What {@link withTimeout} rejects with when the time is up. */
export const TIMEOUT = Symbol('timeout');

/** The failure reason of an error thrown while waiting for Redis. */
export function failureReason(error: unknown): FailureReason {
  return error === TIMEOUT || error instanceof TimedOut ? 'timeout' : 'error';
}

/** `withTimeout` for a script call: its rejection on timeout is a {@link TimedOut} carrying the call. */
export function withLateTimeout(call: Promise<number[]>, ms: number): Promise<number[]> {
  return withTimeout(call, ms).catch((error: unknown) => {
    throw error === TIMEOUT ? new TimedOut(call) : error;
  });
}

/**
 * `promise`, or a rejection with {@link TIMEOUT} after `ms`. The rejection waits for the I/O already
 * there (one `setImmediate`: after the loop's poll phase): a process busy for longer than `ms` (CPU-bound
 * requests, a GC pause) finds the timer due and Redis's reply waiting in the socket at once, and timers
 * run first. The reply, which came in time, decides; before, the failure mode did (a flood of one
 * tenant's requests turned other tenants' sends into 503s "Rate limiter unavailable").
 */
export function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  // One promise and one timer per call (Promise.race plus finally cost two more promises).
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => setImmediate(reject, TIMEOUT), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

/**
 * Corks `stream` (once per tick, whoever else writes to it) and uncorks it in `process.nextTick`, after
 * the current tick's promise continuations: their writes leave in one `writev` instead of one syscall each.
 */
export function corkUntilNextTick(stream: Writable | undefined): void {
  if (stream === undefined || stream.writableCorked !== 0 || typeof stream.cork !== 'function') return;
  stream.cork();
  process.nextTick(uncork, stream);
}

function uncork(stream: Writable): void {
  stream.uncork();
}

/** ARGV[1] of every script: the injected clock in µs, or '' for Redis `TIME`. */
export function nowArg(clock: (() => number) | undefined): string {
  return clock ? String(Math.round(clock() * 1000)) : '';
}

/** Appends capacity, rate and cost of each of `call`'s buckets (the per-bucket ARGV of every script). */
export function pushBucketArgs(
  args: (string | number)[],
  call: PreparedCall,
  policies: readonly Policy[],
): void {
  for (let s = 0; s < call.keys.length; s++) {
    const policy = policies[call.slotPolicy[s]!]!;
    args.push(policy.capacity, policy.ratePerSecond, call.costs[s]!);
  }
}

/** The arguments of the one-key or N-key script for `call`: its keys, now, the TTL margin, its buckets. */
export function scriptArgs(
  call: PreparedCall,
  now: string,
  ttlMarginMs: number,
  policies: readonly Policy[],
): (string | number)[] {
  const args: (string | number)[] = [...call.keys, now, ttlMarginMs];
  pushBucketArgs(args, call, policies);
  return args;
}
