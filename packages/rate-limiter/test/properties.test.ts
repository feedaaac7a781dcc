import fc from 'fast-check';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Algorithm, type PolicyState, RateLimiter } from '../src/index.js';
import { gcraStep, type ModelAnswer, type TokenBucketState, tokenBucketStep } from '../src/models.js';
import { connectRedis, randomPrefix } from './support/redis.js';

// The Lua scripts against the pure TypeScript models (src/models.ts) on random (time, cost) traces with
// the injected clock: every answer must be identical, bit for bit (both compute in IEEE-754 doubles in
// the same order, and the scripts store doubles with %.17g, which round-trips).

let redis: Redis | Cluster;
beforeAll(async () => {
  redis = await connectRedis();
});
afterAll(() => redis.disconnect());

const START_MS = 1_760_000_000_000;

const policyArb = fc.record({
  capacity: fc.oneof(fc.integer({ min: 1, max: 50 }), fc.double({ min: 0.5, max: 50, noNaN: true })),
  ratePerSecond: fc.oneof(fc.integer({ min: 1, max: 100 }), fc.double({ min: 0.01, max: 1000, noNaN: true })),
});
/** A step: milliseconds since the previous call (0 = same instant) and the cost as a share of capacity. */
const stepArb = fc.record({
  dtMs: fc.oneof(
    fc.constant(0),
    fc.double({ min: 0, max: 3000, noNaN: true }),
    fc.integer({ min: 0, max: 200 }),
  ),
  costShare: fc.oneof(fc.constant(0), fc.constant(1), fc.double({ min: 0, max: 1, noNaN: true })),
  integerCost: fc.boolean(),
});

function costOf(capacity: number, step: { costShare: number; integerCost: boolean }): number {
  const cost = capacity * step.costShare;
  return step.integerCost ? Math.floor(cost) : cost;
}

type Model = (nowUs: number, capacity: number, rate: number, cost: number) => ModelAnswer;

function tokenBucketModel(): Model {
  let state: TokenBucketState | undefined;
  return (now, capacity, rate, cost) => {
    const step = tokenBucketStep(state, now, capacity, rate, cost);
    state = step.state ?? state;
    return step.answer;
  };
}

function gcraModel(): Model {
  let tat: number | undefined;
  return (now, capacity, rate, cost) => {
    const step = gcraStep(tat, now, capacity, rate, cost);
    tat = step.tat ?? tat;
    return step.answer;
  };
}

describe.each([
  ['token-bucket', tokenBucketModel],
  ['gcra', gcraModel],
] as [Algorithm, () => Model][])('%s script = TypeScript model', (algorithm, makeModel) => {
  it('gives identical decisions, remaining, retryAfterMs and resetAfterMs on random traces', async () => {
    await fc.assert(
      fc.asyncProperty(
        policyArb,
        fc.array(stepArb, { minLength: 1, maxLength: 40 }),
        async (policy, steps) => {
          let nowMs = START_MS;
          const limiter = new RateLimiter({
            redis,
            algorithm,
            keyPrefix: randomPrefix(),
            policies: [{ name: 'p', ...policy }],
            denyCache: false,
            clock: () => nowMs,
          });
          const model = makeModel();
          for (const step of steps) {
            nowMs += step.dtMs;
            const cost = costOf(policy.capacity, step);
            const result = await limiter.consume('user', cost);
            const expected = model(Math.round(nowMs * 1000), policy.capacity, policy.ratePerSecond, cost);
            expect({
              allowed: result.allowed,
              remaining: result.remaining,
              retryAfterMs: result.retryAfterMs,
              resetAfterMs: result.resetAfterMs,
            }).toEqual(expected);
          }
        },
      ),
      { numRuns: 60 },
    );
  });

  it('decides two policies all or nothing, like the model of each taken together', async () => {
    await fc.assert(
      fc.asyncProperty(
        policyArb,
        policyArb,
        fc.array(stepArb, { minLength: 1, maxLength: 30 }),
        async (a, b, steps) => {
          let nowMs = START_MS;
          const limiter = new RateLimiter({
            redis,
            algorithm,
            keyPrefix: randomPrefix(),
            policies: [
              { name: 'a', ...a },
              { name: 'b', ...b },
            ],
            hashTag: 'properties',
            denyCache: false,
            clock: () => nowMs,
          });
          let stateA: TokenBucketState | number | undefined;
          let stateB: TokenBucketState | number | undefined;
          const step1 = (
            state: TokenBucketState | number | undefined,
            now: number,
            p: typeof a,
            cost: number,
          ) =>
            algorithm === 'gcra'
              ? (({ tat, answer }) => ({ next: tat, answer }))(
                  gcraStep(state as number | undefined, now, p.capacity, p.ratePerSecond, cost),
                )
              : (({ state: next, answer }) => ({ next, answer }))(
                  tokenBucketStep(
                    state as TokenBucketState | undefined,
                    now,
                    p.capacity,
                    p.ratePerSecond,
                    cost,
                  ),
                );
          for (const step of steps) {
            nowMs += step.dtMs;
            const now = Math.round(nowMs * 1000);
            const costA = costOf(a.capacity, step);
            const costB = costOf(b.capacity, { ...step, costShare: 1 - step.costShare });
            const result = await limiter.consume({ a: 'x', b: 'y' }, { a: costA, b: costB });
            const alone = [step1(stateA, now, a, costA), step1(stateB, now, b, costB)] as const;
            const allowed = alone[0].answer.allowed && alone[1].answer.allowed;
            expect(result.allowed).toBe(allowed);
            expect(result.policies.map((p) => p.allowed)).toEqual(alone.map((s) => s.answer.allowed));
            if (allowed) {
              stateA = alone[0].next ?? stateA;
              stateB = alone[1].next ?? stateB;
            } else {
              // Nothing consumed: every policy reports its bucket as a cost-0 call sees it.
              const peeked = [step1(stateA, now, a, 0), step1(stateB, now, b, 0)];
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

/** One decision of a model on a bucket's state (undefined: never written): the next state, if written. */
type Step = (
  state: unknown,
  now: number,
  capacity: number,
  rate: number,
  cost: number,
) => { state: unknown; answer: ModelAnswer };
const tokenBucketModelStep: Step = (state, now, capacity, rate, cost) =>
  tokenBucketStep(state as TokenBucketState | undefined, now, capacity, rate, cost);
const gcraModelStep: Step = (state, now, capacity, rate, cost) => {
  const step = gcraStep(state as number | undefined, now, capacity, rate, cost);
  return { state: step.tat, answer: step.answer };
};
const batched: [Algorithm, Step][] = [
  ['token-bucket', tokenBucketModelStep],
  ['gcra', gcraModelStep],
];

describe.each(batched)(
  '%s: one-bucket calls made in the same tick (batchCalls: one script call for all)',
  (algorithm, modelStep) => {
    it('decide as the calls would one after the other, in call order, at one instant (fast-check)', async () => {
      await fc.assert(
        fc.asyncProperty(
          policyArb,
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
            const limiter = new RateLimiter({
              redis,
              algorithm,
              keyPrefix: randomPrefix(),
              policies: [{ name: 'p', ...policy }],
              denyCache: false,
              clock: () => nowMs,
            });
            const states = new Map<string, unknown>();
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
                expect({
                  allowed: results[i]!.allowed,
                  remaining: results[i]!.remaining,
                  retryAfterMs: results[i]!.retryAfterMs,
                  resetAfterMs: results[i]!.resetAfterMs,
                }).toEqual(step.answer);
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
    /** Share of a policy's capacity in [0, 1]: 0 (a peek) and 1 (the whole bucket) often. */
    const shareArb = fc.oneof(fc.constant(0), fc.constant(1), fc.double({ min: 0, max: 1, noNaN: true }));
    const callArb = fc.record({
      sender: fc.constantFrom('s1', 's2'),
      recipients: fc.uniqueArray(fc.constantFrom('r1', 'r2', 'r3', 'r4'), { minLength: 1, maxLength: 3 }),
      senderShare: shareArb,
      recipientShares: fc.array(shareArb, { minLength: 3, maxLength: 3 }),
      integerCost: fc.boolean(),
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
      integerCost: true,
    });

    it('decide as the calls would one after the other, each all or nothing, in call order (fast-check)', async () => {
      // Calls where a bucket that refused in an earlier call of the same tick is allowed (and taken from).
      let deniedThenAllowed = 0;
      await fc.assert(
        fc.asyncProperty(policyArb, policyArb, ticksArb, async (a, b, ticks) => {
          let nowMs = START_MS;
          const limiter = new RateLimiter({
            redis,
            algorithm,
            keyPrefix: randomPrefix(),
            policies: [
              { name: 'sender', ...a },
              { name: 'recipient', ...b },
            ],
            hashTag: 'properties',
            denyCache: false,
            clock: () => nowMs,
          });
          const states = new Map<string, unknown>();
          for (const tick of ticks) {
            nowMs += tick.dtMs;
            const now = Math.round(nowMs * 1000);
            const buckets = tick.calls.map((c) => [
              {
                key: `s:${c.sender}`,
                id: c.sender,
                policy: a,
                cost: costOf(a.capacity, { ...c, costShare: c.senderShare }),
              },
              ...c.recipients.map((id, j) => ({
                key: `r:${id}`,
                id,
                policy: b,
                cost: costOf(b.capacity, { ...c, costShare: c.recipientShares[j]! }),
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
              const reported = (state: PolicyState) => ({
                allowed: state.allowed,
                remaining: state.remaining,
                retryAfterMs: state.retryAfterMs,
                resetAfterMs: state.resetAfterMs,
              });
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
                // first, then recipients in order); a wait may round to 0 (a cost of 5e-324).
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
