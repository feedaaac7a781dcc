import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { gcraStep, refillTokenBucket, type TokenBucketState, tokenBucketStep } from './models.js';

describe('GCRA and token bucket models', () => {
  it('make the same admission decisions on the same trace', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 100 }),
        fc.double({ min: 0.01, max: 1000, noNaN: true }),
        fc.array(
          fc.record({
            dtUs: fc.integer({ min: 0, max: 5_000_000 }),
            share: fc.double({ min: 0, max: 1, noNaN: true }),
          }),
          {
            maxLength: 60,
          },
        ),
        (capacity, rate, steps) => {
          let now = 1_760_000_000_000_000;
          let bucket: TokenBucketState | undefined;
          let tat: number | undefined;
          for (const step of steps) {
            now += step.dtUs;
            const cost = Math.floor(capacity * step.share);
            const tokensBefore = refillTokenBucket(bucket, now, capacity, rate).tokens;
            // Both compute in doubles by different routes: at an exact boundary (within 1e-6 token) one
            // rounding may fall each way, and from there on the two states legitimately differ.
            if (Math.abs(tokensBefore - cost) < 1e-6) return;
            const a = tokenBucketStep(bucket, now, capacity, rate, cost);
            const b = gcraStep(tat, now, capacity, rate, cost);
            expect(b.answer.allowed).toBe(a.answer.allowed);
            expect(Math.abs(b.answer.remaining - a.answer.remaining)).toBeLessThanOrEqual(1);
            bucket = a.state ?? bucket;
            tat = b.tat ?? tat;
          }
        },
      ),
      { numRuns: 500 },
    );
  });
});
