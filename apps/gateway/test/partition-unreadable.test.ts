import { partitionOf } from '@herald/config';
import { envelopeIndexKey } from '@herald/protocol';
import { randomId } from '@herald/testing';
import { describe, expect, it } from 'vitest';
import { auth, testAppForFile } from './helpers.js';

// A notification's status and cancel ask every partition at once (the id does not say the recipient's).
// One partition that cannot answer (on a Cluster, the slot of its queue moving: Redis answers TRYAGAIN
// to its scripts until the move ends) made every status and cancel a 503, those of notifications found
// in another partition too. Here one partition's envelope index is a key of another type, which fails
// its lookups the same way.
const PARTITIONS = 2;
const app = await testAppForFile({
  HERALD_QUEUE_PARTITIONS: String(PARTITIONS),
  HERALD_RATE_LIMIT_BURST: '1000',
  HERALD_SENDER_RATE_LIMIT_BURST: '1000',
});

describe('one queue partition that cannot answer', () => {
  it('does not hold up the status and cancel of a notification another partition has; an id found nowhere is a 503', async () => {
    const user = Array.from({ length: 50 }, (_, i) => randomId(`p${i}`)).find(
      (candidate) => partitionOf('default', candidate, PARTITIONS) === 0,
    );
    if (user === undefined) throw new Error('no user of partition 0');
    // A job of its own (a delay), which status and cancel find by its id.
    const sent = await app.inject({
      method: 'POST',
      url: '/notify',
      headers: auth,
      payload: { userId: user, payload: {}, delayMs: 60_000 },
    });
    expect(sent.statusCode).toBe(202);
    const { id } = sent.json<{ id: string }>();

    const partition = app.queues[1];
    if (partition === undefined) throw new Error('no partition 1');
    const broken = envelopeIndexKey({ prefix: partition.opts.prefix ?? 'bull', name: partition.name });
    await app.queueConnection.del(broken);
    await app.queueConnection.set(broken, 'not a hash');
    try {
      const status = await app.inject({ method: 'GET', url: `/notifications/${id}`, headers: auth });
      expect(status.statusCode, status.body).toBe(200);
      expect(status.json()).toMatchObject({ id, status: 'queued' });
      const cancel = await app.inject({ method: 'DELETE', url: `/notifications/${id}`, headers: auth });
      expect(cancel.statusCode, cancel.body).toBe(200);
      expect(cancel.json()).toMatchObject({ id, status: 'cancelled' });
      // Found nowhere: it may be in the partition that did not answer, so no 404 (unknown) either.
      const unknown = await app.inject({
        method: 'GET',
        url: `/notifications/${crypto.randomUUID()}`,
        headers: auth,
      });
      expect(unknown.statusCode, unknown.body).toBe(503);
    } finally {
      await app.queueConnection.del(broken);
    }
  });
});
