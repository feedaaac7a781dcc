import { type AppProcess, startRedisServer } from '@herald/testing';
import { describe, expect, it } from 'vitest';
import { randomId, Stack, type TestClient, waitFor } from './support/stack.js';

/**
 * A realtime server of its own Redis, one client connected to it, then that Redis frozen (SIGSTOP: a host
 * paused, a failover that hangs) while `test` runs; resumed and everything stopped after.
 */
async function withFrozenRedis(
  name: string,
  test: (realtime: AppProcess, client: TestClient) => Promise<void>,
): Promise<void> {
  const redis = await startRedisServer();
  const stack = new Stack(redis.url);
  let frozen = false;
  try {
    const realtime = await stack.start('realtime', name);
    const client = stack.client(randomId('frozen'));
    await client.connect(realtime.url);
    redis.process.kill('SIGSTOP');
    frozen = true;
    await test(realtime, client);
  } finally {
    if (frozen) redis.process.kill('SIGCONT');
    await stack.dispose();
    await redis.dispose();
  }
}

// A realtime server asked to stop while its Redis is frozen: its clients are told to go elsewhere, and
// it exits cleanly, whatever Redis does meanwhile.
describe('realtime SIGTERM while Redis is frozen', () => {
  it('says goodbye to every socket at once, and exits 0 (not killed by its grace timer)', async () => {
    await withFrozenRedis('rt-frozen', async (realtime, client) => {
      const exit = realtime.stop('SIGTERM');
      // Told while the server is still closing, not when it is killed.
      await waitFor(() => client.goodbyes.length > 0, { what: 'the goodbye' });
      expect(client.goodbyes).toEqual([
        expect.objectContaining({ code: 'HERALD_SERVER_SHUTDOWN', reconnect: true }),
      ]);
      expect(await exit).toBe(0);
    });
  }, 60_000);
});

// A client's commands while Redis is frozen: each is answered HERALD_ERR_UNAVAILABLE once Redis has not
// answered for a while, as when it is down, not held for as long as Redis stays frozen (a client without
// a timeout of its own would wait for ever).
describe('realtime commands while Redis is frozen', () => {
  it('answers every command HERALD_ERR_UNAVAILABLE while Redis stays frozen', async () => {
    await withFrozenRedis('rt-frozen-commands', async (_realtime, client) => {
      const answers: Record<string, unknown> = {};
      const commands: [string, unknown][] = [
        ['ack', { ids: ['x'] }],
        ['read', { ids: ['x'] }],
        ['read-all', {}],
        ['list', { limit: 5 }],
        ['preferences', {}],
        ['mute', { topics: ['t'] }],
      ];
      for (const [event, body] of commands) {
        void client.command(event, body).then(
          (answer) => (answers[event] = answer),
          (error: unknown) => (answers[event] = String(error)),
        );
      }
      // Answered while Redis is still frozen (it is resumed only after).
      await waitFor(() => Object.keys(answers).length === commands.length, {
        timeoutMs: 15_000,
        what: 'every command answered',
      });
      for (const [event] of commands) {
        expect(answers[event], event).toMatchObject({ ok: false, code: 'HERALD_ERR_UNAVAILABLE' });
      }
    });
  }, 60_000);
});
