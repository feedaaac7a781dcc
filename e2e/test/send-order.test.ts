import { redisUrl } from '@herald/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postNotify, randomId, Stack, waitFor } from './support/stack.js';

// A backend that sends "shipped" and then "delivered" to one user expects them in that order. The worker
// runs up to HERALD_WORKER_CONCURRENCY jobs at once (50 by default); one user's must still be stored,
// and so shown, in the order they were sent.
describe('one user’s notifications, stored and shown in send order', () => {
  const stack = new Stack(redisUrl(), {
    HERALD_RATE_LIMIT_BURST: '10000',
    HERALD_RATE_LIMIT_PER_SECOND: '1000',
    HERALD_SENDER_RATE_LIMIT_BURST: '10000',
    HERALD_SENDER_RATE_LIMIT_PER_SECOND: '1000',
  });
  let gatewayUrl = '';
  let realtimeUrl = '';
  beforeAll(async () => {
    const [gateway, realtime] = await Promise.all([
      stack.start('gateway', 'gw'),
      stack.start('realtime', 'rt'),
      stack.start('worker', 'worker'),
    ]);
    gatewayUrl = gateway.url;
    realtimeUrl = realtime.url;
  }, 60_000);
  afterAll(() => stack.dispose());

  const post = async (path: string, body: unknown) => {
    const response = await postNotify(gatewayUrl, path, body);
    if (response.status !== 202) throw new Error(`${response.status} ${await response.text()}`);
    return (await response.json()) as { id?: string; results?: { id: string }[] };
  };

  it('a batch of 50 to one user, among 10 other users’ batches: its inbox in the batch’s order', async () => {
    for (let round = 0; round < 5; round++) {
      const user = randomId(`order${round}`);
      const others = Array.from({ length: 10 }, (_, i) => randomId(`other${round}-${i}`));
      const batch = (userId: string, count: number) =>
        post('/notify/batch', {
          notifications: Array.from({ length: count }, (_, n) => ({ userId, payload: { n } })),
        });
      const [mine] = await Promise.all([batch(user, 50), ...others.map((other) => batch(other, 5))]);
      const sent = (mine.results ?? []).map((result) => result.id);
      await waitFor(async () => (await stack.inboxIds(user)).length === 50, {
        timeoutMs: 30_000,
        what: `round ${round}: 50 in the inbox`,
      });
      expect(await stack.inboxIds(user)).toEqual(sent);
    }
  }, 120_000);

  it('sent one after another to a connected user: shown live in that order', async () => {
    const user = randomId('live-order');
    const client = stack.client(user);
    await client.connect(realtimeUrl, '0-0');
    const sent: string[] = [];
    for (let n = 0; n < 40; n++)
      sent.push((await post('/notify', { userId: user, payload: { n } })).id ?? '');
    await waitFor(() => client.received.length === 40, { timeoutMs: 30_000, what: '40 shown' });
    expect(client.received.map((event) => event.id)).toEqual(sent);
    client.check(sent);
  }, 60_000);
});
