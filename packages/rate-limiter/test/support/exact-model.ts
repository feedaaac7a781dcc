import type { Algorithm } from '../../src/index.js';

// The reference the scripts are tested against: a token bucket in exact rational arithmetic (BigInt
// numerator and denominator), written from the definition, not from the scripts' formulas. The scripts
// compute in doubles (token bucket: microtokens; GCRA: a theoretical arrival time in whole µs); this
// model never rounds until the answer's own floor and ceil, so any rounding of theirs that changes an
// answer (a decision, a whole unit left, a millisecond of wait) makes the two differ.
//
// GCRA is the same bucket: one unit back every `interval` = round(1e6 / rate) µs (gcra-n.lua's header),
// i.e. a rate of exactly 1e6 / interval units per second.

/** An exact rational number: `n / d` with `d > 0`. */
export class Exact {
  private constructor(
    readonly n: bigint,
    readonly d: bigint,
  ) {}

  static of(n: bigint, d = 1n): Exact {
    if (d < 0n) return new Exact(-n, -d);
    return new Exact(n, d);
  }

  /** The exact value of a double (every finite double is an integer over a power of two). */
  static fromNumber(x: number): Exact {
    if (!Number.isFinite(x)) throw new Error(`not finite: ${x}`);
    let d = 1n;
    while (!Number.isInteger(x)) {
      x *= 2; // exact: a double times two is a double (far from overflow here)
      d *= 2n;
    }
    return Exact.of(BigInt(x), d);
  }

  add(o: Exact): Exact {
    return Exact.of(this.n * o.d + o.n * this.d, this.d * o.d);
  }
  sub(o: Exact): Exact {
    return Exact.of(this.n * o.d - o.n * this.d, this.d * o.d);
  }
  mul(o: Exact): Exact {
    return Exact.of(this.n * o.n, this.d * o.d);
  }
  div(o: Exact): Exact {
    return Exact.of(this.n * o.d, this.d * o.n);
  }
  cmp(o: Exact): number {
    const l = this.n * o.d;
    const r = o.n * this.d;
    return l < r ? -1 : l > r ? 1 : 0;
  }
  min(o: Exact): Exact {
    return this.cmp(o) <= 0 ? this : o;
  }
  floor(): number {
    const q = this.n / this.d; // BigInt division truncates toward zero
    return Number(this.n < 0n && q * this.d !== this.n ? q - 1n : q);
  }
  ceil(): number {
    return 0 - Exact.of(-this.n, this.d).floor(); // 0 - x, not -x: never -0
  }
}

/** A bucket: exact tokens at `ts` (µs). */
export interface ExactBucket {
  tokens: Exact;
  ts: bigint;
}

/** One answer, in the shape of a policy's state. */
export interface ExactAnswer {
  allowed: boolean;
  remaining: number;
  retryAfterMs: number;
  resetAfterMs: number;
}

const US_PER_S = Exact.of(1_000_000n);
const MS_PER_S = Exact.of(1000n);

/** The refill rate the algorithm really runs, in units per second, exactly. */
export function exactRate(algorithm: Algorithm, ratePerSecond: number): Exact {
  if (algorithm === 'gcra') {
    const interval = Math.max(1, Math.round(1e6 / ratePerSecond)); // whole µs per unit
    return Exact.of(1_000_000n, BigInt(interval));
  }
  return Exact.fromNumber(ratePerSecond);
}

/**
 * One call of `cost` at `nowUs` on `bucket` (undefined: never written, full): allowed when the bucket
 * holds the cost, then taken. Returns the bucket to keep (undefined when nothing was written).
 */
export function exactStep(
  bucket: ExactBucket | undefined,
  nowUs: number,
  capacity: number,
  rate: Exact,
  cost: number,
): { state: ExactBucket | undefined; answer: ExactAnswer } {
  const now = BigInt(nowUs);
  const full = Exact.fromNumber(capacity);
  const want = Exact.fromNumber(cost);
  let tokens = bucket?.tokens ?? full;
  let ts = bucket?.ts ?? now;
  if (now > ts) {
    tokens = tokens
      .add(
        Exact.of(now - ts)
          .mul(rate)
          .div(US_PER_S),
      )
      .min(full);
    ts = now;
  }
  const allowed = tokens.cmp(want) >= 0;
  const msUntil = (units: Exact) => units.div(rate).mul(MS_PER_S).ceil();
  const retryAfterMs = allowed ? 0 : msUntil(want.sub(tokens));
  let state: ExactBucket | undefined;
  if (allowed && cost > 0) {
    tokens = tokens.sub(want);
    state = { tokens, ts };
  }
  return {
    state,
    answer: { allowed, remaining: tokens.floor(), retryAfterMs, resetAfterMs: msUntil(full.sub(tokens)) },
  };
}
