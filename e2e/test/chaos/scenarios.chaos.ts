import { appendFileSync } from 'node:fs';
import { waitFor } from '@herald/testing';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import {
  AFTER_MS,
  expectGoals,
  PER_SECOND,
  RECOVERY_GOAL_MS,
  REDIS_STOP_MS,
  startStack,
  USERS,
  WARMUP_MS,
} from './goals.js';
import { type ChaosResult, table } from './ledger.js';
import { ChaosStack, type Kind, pause, runScenario } from './stack.js';

/**
 * The chaos suite (`pnpm test:chaos`): load with an `Idempotency-Key` on every request, real clients,
 * one real fault per scenario on real processes; the ledger of 202s must match what the clients were
 * shown: nothing missing, nothing twice, nothing out of order, and recovery within 5 s of the fault's end.
 */
const results: ChaosResult[] = [];

/** `kill -9` of the first `kind` process, then a new one: the fault ends when it is up. */
async function killAndReplace(stack: ChaosStack, kind: Kind): Promise<void> {
  const [app] = stack.apps[kind];
  if (app) await stack.kill(app);
  await stack.start(kind);
}

describe.sequential('chaos: ledger of 202s against what clients were shown', () => {
  const stacks: ChaosStack[] = [];
  afterEach(async () => {
    for (const stack of stacks.splice(0)) await stack.dispose();
  });
  afterAll(() => {
    const report = table(results, RECOVERY_GOAL_MS);
    process.stderr.write(`\nChaos suite (${USERS} users, ${PER_SECOND}/s):\n${report}\n`);
    if (process.env.CHAOS_REPORT) appendFileSync(process.env.CHAOS_REPORT, `${report}\n`);
  });

  const scenarios: {
    title: string;
    scenario: string;
    stack?: Parameters<typeof startStack>[2];
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
      stack: { gatewayClockSkew: '+30s' },
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
        const stack = await startStack(await ChaosStack.create(), stacks, setup);
        const result = await runScenario(stack, {
          users: USERS,
          perSecond: PER_SECOND,
          warmupMs: WARMUP_MS,
          afterMs: AFTER_MS,
          scenario,
          fault: () => fault(stack),
        });
        expectGoals(result, results);
      },
      120_000 + REDIS_STOP_MS,
    );
  }
});
