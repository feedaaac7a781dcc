import { entries, SECRET } from '@herald/e2e/support';
import { signUserToken } from '@herald/protocol';
import { startApp, waitFor } from '@herald/testing';
import { describe, expect, it } from 'vitest';
import { itemIds, live, record } from './support/recorder.js';
import { connections, notify, perTest, randomId } from './support/stack.js';

describe('a client whose clock is off', () => {
  const each = perTest();

  it('an hour ahead of the servers: one token and one socket, not a refresh loop', async () => {
    const { stack, gateway } = await each.start(['gateway', 'worker']);
    // The realtime server's clock is an hour behind this process's, which is the client's (`faketime`).
    const realtime = await startApp({
      name: 'rt-behind',
      entry: entries.realtime,
      env: { ...stack.env, HERALD_INSTANCE_ID: 'rt-behind' },
      command: 'faketime',
      args: ['-f', '-1h', process.execPath, entries.realtime],
      into: stack.processes,
    });
    const user = randomId('skewed');
    // Tokens as a backend on the servers' clock mints them: an hour of life from its now, so to the
    // client's clock each one expires as it arrives (it used to be refreshed at once, in a loop: about
    // 20 tokens and sockets a second).
    const alice = each.track(
      record({
        url: realtime.url,
        tabs: false,
        getToken: async () =>
          (
            await signUserToken({
              userId: user,
              tenantId: 'default',
              keyId: 'test-key',
              secret: SECRET,
              ttlSeconds: 3600,
              now: new Date(Date.now() - 3_600_000),
            })
          ).token,
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
