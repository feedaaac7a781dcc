import { redisUrl } from '@herald/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { randomId, Stack, waitFor } from './support/stack.js';

// Redis 7 sharded pub/sub (SPUBLISH/SSUBSCRIBE, one channel per user) also runs on a single Redis,
// which is what this checks: the worker's and realtime's @herald/live agree in sharded mode.
describe('sharded pub/sub mode (HERALD_PUBSUB_MODE=sharded)', () => {
  const stack = new Stack(redisUrl(), { HERALD_PUBSUB_MODE: 'sharded' });
  afterAll(() => stack.dispose());

  it('delivers live and replayed notifications, and unread counts to tabs on both instances', async () => {
    const { a, b } = await stack.startDelivery();
    const user = randomId('sharded');
    const early = await stack.send(user, 10);
    const onA = stack.client(user);
    const onB = stack.client(user);
    await Promise.all([onA.connect(a.url, '0-0'), onB.connect(b.url, '0-0')]);
    const late = await stack.send(user, 20);
    await waitFor(() => onA.received.length === 30 && onB.received.length === 30, {
      timeoutMs: 30_000,
      what: '30 on both',
    });
    onA.check([...early, ...late]);
    onB.check([...early, ...late]);
    await waitFor(() => onB.unread?.count === 30, { what: 'unread 30 on B' });
    expect(await onA.command('read', { ids: [early[0]] })).toMatchObject({ ok: true, changed: 1 });
    await waitFor(() => onB.unread?.count === 29, { what: 'unread 29 pushed to the tab on B' });
  });
});
