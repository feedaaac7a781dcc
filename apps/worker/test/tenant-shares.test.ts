import { queueConnection, randomId, waitFor } from '@herald/testing';
import { Queue, Worker } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import { busyDelayMs, TenantShares } from '../src/tenant-shares.js';

const closing: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  while (closing.length > 0) await closing.pop()?.();
});

describe('busyDelayMs: a held job comes back about when its turn comes', () => {
  it('behind a slow endpoint, at most 30 s (a backlog of 1,500 costs ~50 fetches a second, not thousands); behind a fast one, as the slots free (a doubling wait left a fast endpoint idle for seconds of a burst)', () => {
    // 1,500 ahead, 4 slots, 4.5 s each: 28 min of turns, capped.
    expect(busyDelayMs(1500, 4, 4500, 0)).toBe(30_000);
    // Behind a fast endpoint (200 ms a message, 4 slots), each comes back as its slot frees: the 200th
    // held after 10 s, the first ones at once (a burst of 200 took 45–69 s with a doubling wait, the
    // endpoint idle for 12–24 s of it).
    expect(busyDelayMs(199, 4, 200, 0)).toBe(10_000);
    expect(busyDelayMs(40, 4, 200, 0)).toBe(2200);
    expect(busyDelayMs(0, 4, 200, 0)).toBe(250);
    // Up to 50 % more at random.
    expect(busyDelayMs(40, 4, 200, 1)).toBe(3300);
  });
});

describe('TenantShares', () => {
  it('a job held back behind one that does not end waits longer and longer (before: every 250–500 ms, ~3,500 job fetches a second for a 1,500-job backlog)', async () => {
    const name = randomId('shares');
    const queue = new Queue(name, { prefix: '{herald}', connection: queueConnection() });
    closing.push(() => queue.obliterate({ force: true }).then(() => queue.close()));
    const shares = new TenantShares(1);
    let release: () => void = () => {};
    const hold = new Promise<void>((resolve) => {
      release = resolve;
    });
    // When each job was held back, by job id.
    const held = new Map<string, number[]>();
    const worker = new Worker(
      name,
      async (job, token) =>
        shares.run(
          job,
          token,
          'acme',
          () => hold,
          () => {
            const times = held.get(job.id as string) ?? [];
            times.push(Date.now());
            held.set(job.id as string, times);
          },
        ),
      { prefix: '{herald}', connection: queueConnection(), concurrency: 5 },
    );
    closing.push(async () => {
      release();
      await worker.close();
    });
    await queue.addBulk(Array.from({ length: 5 }, (_, n) => ({ name: 'w', data: { n } })));
    // One job holds acme's share; the four others are held back until it ends, four times each here:
    const heldOften = () => [...held.values()].filter((times) => times.length >= 4);
    await waitFor(() => heldOften().length > 0, { timeoutMs: 30_000, what: 'a job held back four times' });
    for (const times of heldOften()) {
      const gaps = times.slice(1).map((at, i) => at - (times[i] as number));
      // Its turn moves back as the running job takes longer (it never ends here): the waits grow, the third
      // over 750 ms and over twice the first.
      expect(gaps.at(-1)).toBeGreaterThan(750);
      expect(gaps.at(-1)).toBeGreaterThan(2 * (gaps[0] as number));
    }
    // Released: every job runs (the held ones come back when their wait ends).
    release();
    await waitFor(async () => (await queue.getJobCounts('completed')).completed === 5, {
      timeoutMs: 60_000,
      what: 'the five jobs completed',
    });
  }, 90_000);
});
