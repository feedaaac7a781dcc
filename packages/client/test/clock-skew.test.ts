import { API_KEY, gatewayCall } from '@herald/e2e/support';
import { waitFor } from '@herald/testing';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { itemIds, live, record } from './support/recorder.js';
import { connections, notify, perTest, randomId } from './support/stack.js';

describe('a client whose clock is off', () => {
  const each = perTest();
  afterEach(() => {
    vi.useRealTimers();
  });

  it('an hour ahead of the servers: one token and one socket, not a refresh loop', async () => {
    const { gateway, 'rt-a': realtime } = await each.start(['gateway', 'rt-a', 'worker']);
    // The servers' clock is their Redis's (the gateway mints tokens and realtime judges them by its
    // TIME), which a test cannot move (redis-server does not run under `faketime`): this process's
    // clock, the client's, goes an hour ahead instead (its `Date` only; timers run as ever).
    vi.useFakeTimers({ toFake: ['Date'], shouldAdvanceTime: true });
    vi.setSystemTime(Date.now() + 3_600_000);
    const user = randomId('skewed');
    // Tokens from POST /tokens: an hour of life from the servers' now, so to the client's clock each
    // one expires as it arrives (it used to be refreshed at once, in a loop: about 20 tokens and
    // sockets a second).
    const alice = each.track(
      record({
        url: realtime.url,
        tabs: false,
        getToken: async () =>
          (await gatewayCall(gateway.url, API_KEY, 'POST', '/tokens', { body: { userId: user } })).body
            .token as string,
      }),
    );
    await live(alice);
    const sent = await notify(gateway, user, 3);
    await waitFor(() => itemIds(alice).length === 3, { what: 'three live notifications' });
    expect(itemIds(alice)).toEqual(sent);
    await alice.client.markAllRead();
    await waitFor(() => alice.client.getState().unread?.count === 0, { what: 'read' });
    expect(alice.tokens).toBe(1);
    expect(alice.resumes).toHaveLength(1);
    expect(await connections(realtime)).toBe(1);
  });
});
