import { writeFileSync } from 'node:fs';
import { waitFor } from '@herald/testing';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { type ChaosResult, table } from './ledger.js';
import { ChaosStack, type Kind, pause, runScenario } from './stack.js';

/**
 * The chaos suite (`pnpm test:chaos`): load with an `Idempotency-Key` on every request, real clients,
 * one real fault per scenario on real processes; the ledger of 202s must match what the clients were
 * shown: nothing missing, nothing twice, nothing out of order, and recovery within 5 s of the fault's end.
 */
const USERS = 20;
const PER_SECOND = Number(process.env.CHAOS_PER_SECOND ?? 100);
const WARMUP_MS = 3000;
const AFTER_MS = 4000;
/** How long Redis stays stopped: 30 s, 10 s in CI (`.ci/run` sets CHAOS_REDIS_STOP_MS). */
const REDIS_STOP_MS = Number(process.env.CHAOS_REDIS_STOP_MS ?? (process.env.CI ? 10_000 : 30_000));
/** The goal: every late notification shown (every late 202 answered) within 5 s of the fault's end. */
const RECOVERY_GOAL_MS = 5000;
/**
 * What fails the run: the goal is marked in the table, but this 2-core machine is shared (load averages
 * of 10+ seen), so the assertion is a bound that still catches a 15 s stall lock or a 30 s in-flight key.
 */
const RECOVERY_LIMIT_MS = Number(process.env.CHAOS_RECOVERY_LIMIT_MS ?? 12_000);

const results: ChaosResult[] = [];

/**
 * Starts a chaos stack: two gateways (the first under `gatewayWrapper`, e.g. faketime), one worker and
 * two realtime instances.
 */
async function startStack(
  stacks: ChaosStack[],
  options: { gatewayWrapper?: string[] } = {},
): Promise<ChaosStack> {
  const stack = await ChaosStack.create();
  stacks.push(stack);
  await Promise.all([
    stack.start('gateway', options.gatewayWrapper),
    stack.start('gateway'),
    stack.start('worker'),
    stack.start('realtime'),
    stack.start('realtime'),
  ]);
  return stack;
}

/** `kill -9` of the first `kind` process, then a new one: the fault ends when it is up. */
async function killAndReplace(stack: ChaosStack, kind: Kind): Promise<void> {
  const [app] = stack.apps[kind];
  if (app) await stack.kill(app);
  await stack.start(kind);
}

function expectGoals(result: ChaosResult & { refusals: string[] }): void {
  results.push(result);
  process.stderr.write(`${table([result], RECOVERY_GOAL_MS)}\n`);
  expect(result.refusals).toEqual([]);
  expect({ missing: result.missing, ids: result.missingIds }).toEqual({ missing: 0, ids: [] });
  expect(result.duplicates).toBe(0);
  expect(result.outOfOrder).toBe(0);
  expect(result.unexpected).toBe(0);
  expect(result.recoveryMs).toBeLessThanOrEqual(RECOVERY_LIMIT_MS);
  expect(result.acceptRecoveryMs).toBeLessThanOrEqual(RECOVERY_LIMIT_MS);
}

describe.sequential('chaos: ledger of 202s against what clients were shown', () => {
  const stacks: ChaosStack[] = [];
  afterEach(async () => {
    for (const stack of stacks.splice(0)) await stack.dispose();
  });
  afterAll(() => {
    const report = table(results, RECOVERY_GOAL_MS);
    process.stderr.write(`\nChaos suite (${USERS} users, ${PER_SECOND}/s):\n${report}\n`);
    if (process.env.CHAOS_REPORT) writeFileSync(process.env.CHAOS_REPORT, `${report}\n`);
  });

  const scenarios: {
    title: string;
    scenario: string;
    stack?: Parameters<typeof startStack>[1];
    fault: (stack: ChaosStack) => Promise<void>;
  }[] = [
    {
      title: 'kill -9 of the worker (a new one starts)',
      scenario: 'kill -9 worker',
      fault: (stack) => killAndReplace(stack, 'worker'),
    },
    {
      title: 'kill -9 of a realtime instance (its clients fail over to the other; a new one starts)',
      scenario: 'kill -9 realtime',
      fault: (stack) => killAndReplace(stack, 'realtime'),
    },
    {
      title: 'kill -9 of a gateway (the load generator retries its keys on the other; a new one starts)',
      scenario: 'kill -9 gateway',
      fault: (stack) => killAndReplace(stack, 'gateway'),
    },
    {
      title: 'Redis frozen (SIGSTOP) for 5 s',
      scenario: 'Redis SIGSTOP 5 s',
      fault: async (stack) => {
        stack.redis.process.kill('SIGSTOP');
        await pause(5000);
        stack.redis.process.kill('SIGCONT');
      },
    },
    {
      title: `Redis stopped for ${REDIS_STOP_MS / 1000} s (append-only file, restarted on the same port)`,
      scenario: `Redis stopped ${REDIS_STOP_MS / 1000} s`,
      fault: async (stack) => {
        await stack.redis.stop();
        await pause(REDIS_STOP_MS);
        await stack.redis.restart();
      },
    },
    {
      title: 'a gateway whose clock is 30 s ahead (faketime), for the whole run',
      scenario: 'gateway clock +30 s',
      stack: { gatewayWrapper: ['faketime', '-f', '+30s'] },
      fault: async () => {},
    },
    {
      title: 'a realtime instance cut off from Redis for 3 s (its connections killed as they come back)',
      scenario: 'realtime cut from Redis 3 s',
      fault: async (stack) => {
        const [realtime] = stack.apps.realtime;
        if (!realtime) throw new Error('no realtime instance');
        expect(await stack.partition(realtime, 3000)).toBeGreaterThan(0);
        // It noticed: its subscriber came back and read its sockets' inboxes for what it missed.
        await waitFor(() => realtime.lines.some((line) => line.includes('redis back: filling gaps')), {
          what: 'the cut-off realtime instance to fill its gaps',
        });
      },
    },
  ];

  for (const { title, scenario, stack: setup, fault } of scenarios) {
    it(
      title,
      async () => {
        const stack = await startStack(stacks, setup);
        const result = await runScenario(stack, {
          users: USERS,
          perSecond: PER_SECOND,
          warmupMs: WARMUP_MS,
          afterMs: AFTER_MS,
          scenario,
          fault: () => fault(stack),
        });
        expectGoals(result);
      },
      120_000 + REDIS_STOP_MS,
    );
  }
});
