import { freePort, queueConnection, randomId, waitFor } from '@herald/testing';
import { Queue, Worker } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import { createMetrics } from '../src/http.js';

/** `herald_queue_stalled_seconds` by queue label, from one scrape of `metrics`' registry. */
async function stalled(metrics: ReturnType<typeof createMetrics>): Promise<Map<string, number>> {
  const family = await metrics.registry.getSingleMetric('herald_queue_stalled_seconds')?.get();
  return new Map((family?.values ?? []).map(({ labels, value }) => [String(labels.queue), value]));
}

describe('herald_queue_stalled_seconds: a partition no worker takes from', () => {
  const closing: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    await Promise.all(closing.splice(0).map((close) => close()));
  });

  /** A queue of its own (hash-tagged prefix: one slot on a Cluster), closed after the test. */
  function queue(): Queue {
    const created = new Queue(randomId('stall'), {
      prefix: `{${randomId('stall')}}`,
      connection: queueConnection(),
      skipVersionCheck: true,
    });
    closing.push(async () => {
      await created.obliterate({ force: true }).catch(() => {});
      await created.close();
    });
    return created;
  }

  it('rises for each line that does not move (waiting, prioritized, delayed and due), 0 for an empty one, and 0 once a worker takes the jobs', async () => {
    const [waiting, prioritized, delayed, empty] = [queue(), queue(), queue(), queue()];
    await waiting.add('n', { n: 1 });
    await prioritized.add('n', { n: 2 }, { priority: 5 });
    // Due 1 ms after it is added: a worker would move it to wait at once.
    await delayed.add('n', { n: 3 }, { delay: 1 });
    const all = [waiting, prioritized, delayed, empty];
    const metrics = createMetrics(
      async () => ({}),
      () => all,
    );

    const first = await stalled(metrics);
    for (const q of all) expect(first.get(q.qualifiedName)).toBe(0);
    const later = await waitFor(
      async () => {
        const values = await stalled(metrics);
        const rising = [waiting, prioritized, delayed].every(
          (q) => (values.get(q.qualifiedName) ?? 0) >= 0.5,
        );
        return rising ? values : undefined;
      },
      { timeoutMs: 10_000, what: 'every stuck line at 0.5 s or more' },
    );
    expect(later.get(empty.qualifiedName)).toBe(0);

    // A worker on two of them: their line moves and empties, the third still rises.
    for (const q of [waiting, delayed]) {
      const worker = new Worker(q.name, async () => {}, {
        prefix: q.opts.prefix ?? '',
        connection: queueConnection(),
        skipVersionCheck: true,
      });
      closing.unshift(() => worker.close());
    }
    const after = await waitFor(
      async () => {
        const values = await stalled(metrics);
        return values.get(waiting.qualifiedName) === 0 && values.get(delayed.qualifiedName) === 0
          ? values
          : undefined;
      },
      { timeoutMs: 15_000, what: 'the worked queues back at 0' },
    );
    expect(after.get(prioritized.qualifiedName)).toBeGreaterThanOrEqual(
      later.get(prioritized.qualifiedName) ?? 0,
    );
  }, 40_000);

  it('a partition whose Redis does not answer keeps its last value; the scrape answers and the others are read', async () => {
    const reachable = queue();
    await reachable.add('n', { n: 1 });
    // Nothing listens there: its client never connects.
    const unreachable = new Queue(randomId('stall'), {
      prefix: '{unreachable}',
      connection: {
        port: await freePort(),
        host: '127.0.0.1',
        maxRetriesPerRequest: null,
        enableOfflineQueue: true,
      },
      skipVersionCheck: true,
    });
    unreachable.on('error', () => {});
    closing.push(() => unreachable.close());
    const metrics = createMetrics(
      async () => ({}),
      () => [unreachable, reachable],
    );
    await waitFor(async () => ((await stalled(metrics)).get(reachable.qualifiedName) ?? 0) >= 0.3, {
      timeoutMs: 10_000,
      what: 'the reachable queue read while the other does not answer',
    });
    expect((await stalled(metrics)).has(unreachable.qualifiedName)).toBe(false);
  }, 30_000);
});
