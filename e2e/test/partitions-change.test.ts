import { redisUrl } from '@herald/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { API_KEY, randomId, Stack, waitFor } from './support/stack.js';

// An operator changes HERALD_QUEUE_PARTITIONS (3 → 2) while notifications are still queued, some of them
// delayed: the partitions of 3 are not 2 of them plus one (each count picks its own hash tags), so the
// new deployment's workers must find and drain the old partitions, or what was accepted is lost.
describe('HERALD_QUEUE_PARTITIONS changed with notifications still queued', () => {
  const stack = new Stack(redisUrl(), { HERALD_QUEUE_PARTITIONS: '3' });
  afterAll(() => stack.dispose());

  it('none is lost: the workers of the new count drain the old partitions, delayed ones too', async () => {
    // The old deployment: a gateway, no worker yet (everything stays queued).
    const before = await stack.start('gateway', 'gw-3');
    const users = Array.from({ length: 12 }, (_, i) => randomId(`repartition${i}`));
    const sent = new Map<string, string>();
    for (const [i, userId] of users.entries()) {
      const response = await fetch(`${before.url}/notify`, {
        method: 'POST',
        headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ userId, payload: { i }, ...(i % 3 === 0 ? { delayMs: 2000 } : {}) }),
      });
      expect(response.status).toBe(202);
      sent.set(userId, ((await response.json()) as { id: string }).id);
    }
    await before.stop('SIGTERM', 5000);

    // The new deployment: two partitions.
    const after = { HERALD_QUEUE_PARTITIONS: '2' };
    const [gateway] = await Promise.all([
      stack.start('gateway', 'gw-2', after),
      stack.start('worker', 'worker-2', after),
    ]);
    for (const userId of users) {
      await waitFor(async () => (await stack.inboxIds(userId)).length === 1, {
        timeoutMs: 30_000,
        what: `${userId}'s notification stored`,
      });
      expect(await stack.inboxIds(userId)).toEqual([sent.get(userId)]);
    }
    // And the new gateway answers their status (stored, not yet on a screen: queued).
    const [first] = users;
    const id = sent.get(first ?? '');
    const status = await fetch(`${gateway.url}/notifications/${id}`, {
      headers: { authorization: `Bearer ${API_KEY}` },
    });
    expect(status.status).toBe(200);
    expect(await status.json()).toMatchObject({ id, status: 'queued' });
  }, 90_000);
});
