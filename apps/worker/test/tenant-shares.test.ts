import { queueConnection, randomId, waitFor } from '@herald/testing';
import { Queue, Worker } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import { TenantShares } from '../src/tenant-shares.js';

const closing: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  while (closing.length > 0) await closing.pop()?.();
});

describe('TenantShares', () => {
  it('a job held back again and again waits longer each time, up to a bound (before: every 250–500 ms, ~3,500 job fetches a second for a 1,500-job backlog)', async () => {
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
      // Doubling, with up to 50 % jitter: each wait at least 1.2 times the one before, the third over 750 ms.
      for (let i = 1; i < gaps.length; i++) expect(gaps[i]).toBeGreaterThan((gaps[i - 1] as number) * 1.2);
      expect(gaps.at(-1)).toBeGreaterThan(750);
    }
    // Released: every job runs (the held ones come back when their wait ends).
    release();
    await waitFor(async () => (await queue.getJobCounts('completed')).completed === 5, {
      timeoutMs: 60_000,
      what: 'the five jobs completed',
    });
  }, 90_000);
});
