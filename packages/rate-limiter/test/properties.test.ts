import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Algorithm, type PolicyState, RateLimiter } from '../src/index.js';
import { START_MS } from './support/clock.js';
import { type ExactAnswer, type ExactBucket, exactRate, exactStep } from './support/exact-model.js';
import { connectRedisForFile, randomPrefix } from './support/redis.js';

// The Lua scripts against an exact model (test/support/exact-model.ts: a token bucket in BigInt
// rationals, written from the definition; GCRA is that bucket refilled one unit per whole-µs interval)
// on random (time, cost) traces with the injected clock. Every answer must be identical: the decision,
// the whole units left, and the waits in ms. No tolerance: an off-by-one anywhere fails.
//
// The traces stay where the scripts' doubles are exact: capacities and costs in whole units (token
// bucket: also quarters), rates in whole units or eighths per second (GCRA: any rate, since it rounds
// the interval to whole µs), whole µs of time. Outside that domain (a rate of 0.3/s is not 0.3 in
// binary) the scripts round at 1e-16 and this comparison would be about binary fractions, not bugs.

const redis = await connectRedisForFile();

/**
 * The limiter the model is compared with: `policies` by name, in order; the injected clock; no deny cache
 * (every call reaches the script). Several policies share a hash tag (one call's keys: one Cluster slot).
 * A generous timeout: on a loaded machine a script call past the default 150 ms became the failure
 * mode's answer (denied, 1000 ms), which is not the script's and failed the comparison.
 */
function modelLimiter(
  algorithm: Algorithm,
  policies: Record<string, { capacity: number; ratePerSecond: number }>,
  clock: () => number,
): RateLimiter {
  const named = Object.entries(policies).map(([name, policy]) => ({ name, ...policy }));
  return new RateLimiter({
    redis,
    algorithm,
    keyPrefix: randomPrefix(),
    policies: named,
    ...(named.length > 1 ? { hashTag: 'properties' } : {}),
    denyCache: false,
    clock,
    failure: { mode: 'closed', timeoutMs: 10_000 },
  });
}

/** A policy where `algorithm`'s arithmetic is exact. */
function policyArb(algorithm: Algorithm) {
  const wholeCapacity = fc.integer({ min: 1, max: 50 });
  const wholeRate = fc.integer({ min: 1, max: 1000 });
  const eighthRate = fc.integer({ min: 1, max: 80 }).map((k) => k / 8);
  return fc.record({
    capacity:
      algorithm === 'gcra'
        ? wholeCapacity
        : fc.oneof(
            wholeCapacity,
            fc.integer({ min: 2, max: 200 }).map((k) => k / 4),
          ),
    ratePerSecond:
      algorithm === 'gcra'
        ? fc.oneof(wholeRate, eighthRate, fc.double({ min: 0.01, max: 1000, noNaN: true }))
        : fc.oneof(wholeRate, eighthRate),
  });
}

/** Milliseconds since the previous call, in whole µs: 0 (the same instant) often. */
const dtMsArb = fc.oneof(
  fc.constant(0),
  fc.integer({ min: 0, max: 3_000_000 }).map((us) => us / 1000),
  fc.integer({ min: 0, max: 200 }),
);
/** Share of a policy's capacity in [0, 1]: 0 (a peek) and 1 (the whole bucket) often. */
const shareArb = fc.oneof(fc.constant(0), fc.constant(1), fc.double({ min: 0, max: 1, noNaN: true }));
/** A step: milliseconds since the previous call and the cost as a share of capacity. */
const stepArb = fc.record({ dtMs: dtMsArb, costShare: shareArb, quarterCost: fc.boolean() });

/** The cost of a share of `capacity`: whole units, or (token bucket) quarters. */
function costOf(algorithm: Algorithm, capacity: number, step: { costShare: number; quarterCost: boolean }) {
  const quarters = algorithm === 'token-bucket' && step.quarterCost;
  return quarters ? Math.floor(capacity * step.costShare * 4) / 4 : Math.floor(capacity * step.costShare);
}

/** The model's step for `algorithm`: exactStep at the rate the algorithm really runs. */
type Step = (
  state: ExactBucket | undefined,
  now: number,
  capacity: number,
  rate: number,
  cost: number,
) => { state: ExactBucket | undefined; answer: ExactAnswer };
const stepOf =
  (algorithm: Algorithm): Step =>
  (state, now, capacity, rate, cost) =>
    exactStep(state, now, capacity, exactRate(algorithm, rate), cost);

const reported = (state: Pick<PolicyState, keyof ExactAnswer>): ExactAnswer => ({
  allowed: state.allowed,
  remaining: state.remaining,
  retryAfterMs: state.retryAfterMs,
  resetAfterMs: state.resetAfterMs,
});

const ALGORITHMS: Algorithm[] = ['token-bucket', 'gcra'];

describe.each(ALGORITHMS)('%s script = exact model', (algorithm) => {
  const modelStep = stepOf(algorithm);

  it('gives identical decisions, remaining, retryAfterMs and resetAfterMs on random traces', async () => {
    await fc.assert(
      fc.asyncProperty(
        policyArb(algorithm),
        fc.array(stepArb, { minLength: 1, maxLength: 40 }),
        async (policy, steps) => {
          let nowMs = START_MS;
          const limiter = modelLimiter(algorithm, { p: policy }, () => nowMs);
          let state: ExactBucket | undefined;
          for (const step of steps) {
            nowMs += step.dtMs;
            const cost = costOf(algorithm, policy.capacity, step);
            const result = await limiter.consume('user', cost);
            const expected = modelStep(
              state,
              Math.round(nowMs * 1000),
              policy.capacity,
              policy.ratePerSecond,
              cost,
            );
            state = expected.state ?? state;
            expect(reported(result)).toEqual(expected.answer);
          }
        },
      ),
      {
        numRuns: 60,
        examples: [
          // Refills of 0.1, 0.2 and 0.7 tokens: in doubles of whole tokens 1 + 0.1 + 0.2 + 0.7 < 2.
          [
            { capacity: 5, ratePerSecond: 1 },
            [
              { dtMs: 0, costShare: 1, quarterCost: false },
              { dtMs: 1000, costShare: 0, quarterCost: false },
              { dtMs: 100, costShare: 0.05, quarterCost: true },
              { dtMs: 200, costShare: 0.05, quarterCost: true },
              { dtMs: 700, costShare: 0.05, quarterCost: true },
              { dtMs: 0, costShare: 0, quarterCost: false },
            ],
          ],
          // Review finding 9: a fresh GCRA bucket of capacity 7 at 3/s reported 6 left for a cost of 0.
          [{ capacity: 7, ratePerSecond: 3 }, [{ dtMs: 0, costShare: 0, quarterCost: false }]],
        ],
      },
    );
  });

  it('decides two policies all or nothing, like the model of each taken together', async () => {
    await fc.assert(
      fc.asyncProperty(
        policyArb(algorithm),
        policyArb(algorithm),
        fc.array(stepArb, { minLength: 1, maxLength: 30 }),
        async (a, b, steps) => {
          let nowMs = START_MS;
          const limiter = modelLimiter(algorithm, { a: a, b: b }, () => nowMs);
          let stateA: ExactBucket | undefined;
          let stateB: ExactBucket | undefined;
          for (const step of steps) {
            nowMs += step.dtMs;
            const now = Math.round(nowMs * 1000);
            const costA = costOf(algorithm, a.capacity, step);
            const costB = costOf(algorithm, b.capacity, { ...step, costShare: 1 - step.costShare });
            const result = await limiter.consume({ a: 'x', b: 'y' }, { a: costA, b: costB });
            const alone = [
              modelStep(stateA, now, a.capacity, a.ratePerSecond, costA),
              modelStep(stateB, now, b.capacity, b.ratePerSecond, costB),
            ] as const;
            const allowed = alone[0].answer.allowed && alone[1].answer.allowed;
            expect(result.allowed).toBe(allowed);
            expect(result.policies.map((p) => p.allowed)).toEqual(alone.map((s) => s.answer.allowed));
            if (allowed) {
              expect(result.policies.map(reported)).toEqual(alone.map((s) => s.answer));
              stateA = alone[0].state ?? stateA;
              stateB = alone[1].state ?? stateB;
            } else {
              // Nothing consumed: every policy reports its bucket as a cost-0 call sees it.
              const peeked = [
                modelStep(stateA, now, a.capacity, a.ratePerSecond, 0),
                modelStep(stateB, now, b.capacity, b.ratePerSecond, 0),
              ];
              expect(result.policies.map((p) => p.remaining)).toEqual(peeked.map((s) => s.answer.remaining));
              const denying = alone[0].answer.retryAfterMs >= alone[1].answer.retryAfterMs ? 'a' : 'b';
              expect(result.policy).toBe(denying);
              expect(result.retryAfterMs).toBe(
                Math.max(alone[0].answer.retryAfterMs, alone[1].answer.retryAfterMs),
              );
            }
          }
        },
      ),
      { numRuns: 40 },
    );
  });
});

const batched: [Algorithm, Step][] = ALGORITHMS.map((algorithm) => [algorithm, stepOf(algorithm)]);

describe.each(batched)(
  '%s: one-bucket calls made in the same tick (batchCalls: one script call for all)',
  (algorithm, modelStep) => {
    it('decide as the calls would one after the other, in call order, at one instant (fast-check)', async () => {
      await fc.assert(
        fc.asyncProperty(
          policyArb(algorithm),
          fc.array(
            fc.record({
              dtMs: fc.integer({ min: 0, max: 2000 }),
              calls: fc.array(
                fc.record({
                  id: fc.constantFrom('a', 'b', 'c'),
                  costShare: fc.double({ min: 0, max: 1, noNaN: true }),
                }),
                { minLength: 1, maxLength: 30 },
              ),
            }),
            { minLength: 1, maxLength: 8 },
          ),
          async (policy, ticks) => {
            let nowMs = START_MS;
            const limiter = modelLimiter(algorithm, { p: policy }, () => nowMs);
            const states = new Map<string, ExactBucket>();
            for (const tick of ticks) {
              nowMs += tick.dtMs;
              const now = Math.round(nowMs * 1000);
              const costs = tick.calls.map((c) => Math.floor(policy.capacity * c.costShare));
              // All calls of this tick at once: on one node they leave in one batch script call.
              const results = await Promise.all(tick.calls.map((c, i) => limiter.consume(c.id, costs[i])));
              tick.calls.forEach((c, i) => {
                const step = modelStep(
                  states.get(c.id),
                  now,
                  policy.capacity,
                  policy.ratePerSecond,
                  costs[i]!,
                );
                if (step.state !== undefined) states.set(c.id, step.state);
                expect(reported(results[i]!)).toEqual(step.answer);
              });
            }
          },
        ),
        { numRuns: 40 },
      );
    });
  },
);

describe.each(batched)(
  '%s: multi-bucket calls made in the same tick (batchCalls: one script call for all)',
  (algorithm, modelStep) => {
    const callArb = fc.record({
      sender: fc.constantFrom('s1', 's2'),
      recipients: fc.uniqueArray(fc.constantFrom('r1', 'r2', 'r3', 'r4'), { minLength: 1, maxLength: 3 }),
      senderShare: shareArb,
      recipientShares: fc.array(shareArb, { minLength: 3, maxLength: 3 }),
      quarterCost: fc.boolean(),
    });
    type Call = typeof callArb extends fc.Arbitrary<infer T> ? T : never;
    const ticksArb = fc.array(
      fc.record({
        dtMs: fc.integer({ min: 0, max: 2000 }),
        calls: fc.array(callArb, { minLength: 1, maxLength: 30 }),
      }),
      { minLength: 1, maxLength: 6 },
    );
    const call = (
      sender: Call['sender'],
      recipients: Call['recipients'],
      senderShare: number,
      recipientShares: number[],
    ): Call => ({
      sender,
      recipients,
      senderShare,
      recipientShares: [...recipientShares, 0, 0, 0].slice(0, 3),
      quarterCost: false,
    });

    it('decide as the calls would one after the other, each all or nothing, in call order (fast-check)', async () => {
      // Calls where a bucket that refused in an earlier call of the same tick is allowed (and taken from).
      let deniedThenAllowed = 0;
      await fc.assert(
        fc.asyncProperty(policyArb(algorithm), policyArb(algorithm), ticksArb, async (a, b, ticks) => {
          let nowMs = START_MS;
          const limiter = modelLimiter(algorithm, { sender: a, recipient: b }, () => nowMs);
          const states = new Map<string, ExactBucket>();
          for (const tick of ticks) {
            nowMs += tick.dtMs;
            const now = Math.round(nowMs * 1000);
            const buckets = tick.calls.map((c) => [
              {
                key: `s:${c.sender}`,
                id: c.sender,
                policy: a,
                cost: costOf(algorithm, a.capacity, { ...c, costShare: c.senderShare }),
              },
              ...c.recipients.map((id, j) => ({
                key: `r:${id}`,
                id,
                policy: b,
                cost: costOf(algorithm, b.capacity, { ...c, costShare: c.recipientShares[j]! }),
              })),
            ]);
            // Every call of this tick at once: on one node they leave in one batch script call.
            const results = await Promise.all(
              tick.calls.map((c, i) =>
                limiter.consume(
                  { sender: c.sender, recipient: c.recipients },
                  {
                    sender: buckets[i]![0]!.cost,
                    recipient: buckets[i]!.slice(1).map((bucket) => bucket.cost),
                  },
                ),
              ),
            );
            const refused = new Set<string>();
            tick.calls.forEach((_, i) => {
              const result = results[i]!;
              const own = buckets[i]!;
              const alone = own.map((bucket) =>
                modelStep(
                  states.get(bucket.key),
                  now,
                  bucket.policy.capacity,
                  bucket.policy.ratePerSecond,
                  bucket.cost,
                ),
              );
              const allowed = alone.every((step) => step.answer.allowed);
              // Per bucket, what the script reports: the call's answer when it is allowed; when denied,
              // each bucket's own verdict and wait, with its units as a cost-0 call sees them (nothing taken).
              const expected = (k: number) => {
                const step = alone[k]!;
                if (allowed) return step.answer;
                const bucket = own[k]!;
                const peeked = modelStep(
                  states.get(bucket.key),
                  now,
                  bucket.policy.capacity,
                  bucket.policy.ratePerSecond,
                  0,
                );
                return {
                  allowed: step.answer.allowed,
                  remaining: peeked.answer.remaining,
                  retryAfterMs: step.answer.retryAfterMs,
                  resetAfterMs: peeked.answer.resetAfterMs,
                };
              };
              expect(result.allowed).toBe(allowed);
              expect(reported(result.policies[0]!)).toEqual(expected(0));
              const recipient = result.policies[1]!;
              const k = own.findIndex((bucket, j) => j > 0 && bucket.id === recipient.id);
              expect(k).toBeGreaterThan(0);
              expect(reported(recipient)).toEqual(expected(k));
              if (allowed) {
                const fewest = Math.min(...own.slice(1).map((_, j) => alone[j + 1]!.answer.remaining));
                expect(recipient.remaining).toBe(fewest);
                for (let j = 0; j < own.length; j++) {
                  if (refused.has(own[j]!.key)) deniedThenAllowed++;
                  const next = alone[j]!.state;
                  if (next !== undefined) states.set(own[j]!.key, next);
                }
              } else {
                // The denying bucket: of the buckets that refused, the first with the longest wait (sender
                // first, then recipients in order).
                const waits = alone.map((step) => (step.answer.allowed ? -1 : step.answer.retryAfterMs));
                const longest = Math.max(...waits);
                expect(result.retryAfterMs).toBe(longest);
                const denier = own[waits.indexOf(longest)]!;
                expect(result.deniedId).toBe(denier.id);
                expect(result.policy).toBe(denier.policy === a ? 'sender' : 'recipient');
                own.forEach((bucket, j) => {
                  if (!alone[j]!.answer.allowed) refused.add(bucket.key);
                });
              }
            });
          }
        }),
        {
          numRuns: 40,
          examples: [
            [
              { capacity: 5, ratePerSecond: 1 },
              { capacity: 2, ratePerSecond: 1 },
              [
                {
                  dtMs: 0,
                  calls: [
                    call('s1', ['r1'], 0.2, [0.5]), // allowed: r1 2 -> 1, s1 5 -> 4
                    call('s1', ['r2', 'r1'], 0.2, [0.5, 1]), // denied by r1 (1 < 2): r2 and s1 untouched
                    call('s1', ['r1', 'r2'], 0.2, [0.5, 1]), // allowed: r1 1 -> 0, r2 2 -> 0, s1 4 -> 3
                    call('s1', ['r3'], 1, [0]), // denied by s1 (3 < 5)
                    call('s1', ['r3'], 0.6, [0]), // allowed: s1 3 -> 0
                  ],
                },
              ],
            ],
          ],
        },
      );
      expect(deniedThenAllowed).toBeGreaterThan(0);
    });
  },
);
