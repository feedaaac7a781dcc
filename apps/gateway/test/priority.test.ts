import { randomUUID } from 'node:crypto';
import {
  NOTIFY_ENVELOPE_JOB_NAME,
  type NotificationEnvelope,
  type NotificationJob,
  PRIORITY_MAX,
} from '@herald/protocol';
import { queueConnection } from '@herald/testing';
import { type Job, type Queue, Worker } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { auth, testAppForFile } from './helpers.js';

// Envelopes on, as in production. No Herald worker runs: the test takes the jobs itself, in the order
// BullMQ hands them to any worker (BullMQ serves a job without a priority before every prioritised one).
const app = await testAppForFile({
  HERALD_ENVELOPE_WINDOW_MS: '20',
  HERALD_RATE_LIMIT_BURST: '1000',
  HERALD_SENDER_RATE_LIMIT_BURST: '1000',
});

async function send(body: Record<string, unknown>): Promise<string> {
  const response = await app.inject({ method: 'POST', url: '/notify', headers: auth, payload: body });
  expect(response.statusCode, response.body).toBe(202);
  return response.json<{ id: string }>().id;
}

/** The notification ids of `queue`'s jobs, in the order a worker is given them (each job moved to active). */
async function takeOrder(queue: Queue): Promise<string[]> {
  const worker = new Worker(queue.name, undefined, {
    prefix: queue.opts.prefix ?? '',
    connection: queueConnection(),
    autorun: false,
  });
  try {
    const ids: string[] = [];
    for (let n = 0; ; n++) {
      const job = (await worker.getNextJob(`priority-test-${n}`, { block: false })) as Job | undefined;
      if (job === undefined) return ids;
      if (job.name === NOTIFY_ENVELOPE_JOB_NAME)
        ids.push(...(job.data as NotificationEnvelope).items.map((item) => item.id));
      else ids.push((job.data as NotificationJob).id);
    }
  } finally {
    await worker.close(true);
  }
}

describe('priority: the order in which workers take notifications', () => {
  it('one with a priority goes before every one without that waits (1 first); the largest is the same as none, in send order with them', async () => {
    const userId = `priority-${randomUUID()}`;
    // Each send answered before the next: the ones without a priority ride in envelopes of their own.
    const first = await send({ userId, payload: { n: 1 } });
    const five = await send({ userId, payload: { n: 2 }, priority: 5 });
    const second = await send({ userId, payload: { n: 3 } });
    const one = await send({ userId, payload: { n: 4 }, priority: 1 });
    const largest = await send({ userId, payload: { n: 5 }, priority: PRIORITY_MAX });
    const third = await send({ userId, payload: { n: 6 } });
    const queue = app.queues[app.partitionOf('default', userId)] as Queue;
    expect(await takeOrder(queue)).toEqual([one, five, first, second, largest, third]);
  });

  it('a topic send or broadcast with a priority goes before those without', async () => {
    const topic = `priority-${randomUUID().slice(0, 8)}`;
    const plain = await send({ topic, payload: { n: 1 } });
    const urgent = await send({ topic, payload: { n: 2 }, priority: 1 });
    const everyone = await send({ broadcast: true, payload: { n: 3 }, priority: 2 });
    expect(await takeOrder(app.fanoutQueue as unknown as Queue)).toEqual([urgent, everyone, plain]);
  });
});
