import { Stack as ProcessStack } from '@herald/e2e/support';
import { type AppProcess, redisUrl } from '@herald/testing';
import { afterEach } from 'vitest';
import type { Recorded } from './recorder.js';

export { API_KEY, appended, connections, notify, randomId } from '@herald/e2e/support';

/**
 * The e2e suite's process stack (gateway, worker and realtime servers, each its own OS process, on
 * random Redis names) with the client tests' settings.
 */
export class Stack extends ProcessStack {
  constructor(extra: Record<string, string> = {}) {
    super(redisUrl(), {
      // One job at a time: the inbox order is then the send order, which the tests compare with.
      HERALD_WORKER_CONCURRENCY: '1',
      // The tests send bursts to one user.
      HERALD_RATE_LIMIT_BURST: '1000',
      HERALD_RATE_LIMIT_PER_SECOND: '1000',
      ...extra,
    });
  }
}

/**
 * The stack and clients of each test of a `describe`, stopped and closed after each test
 * (`afterEach`). `start(apps, extra)` starts the named apps of a new stack (`'rt-a'`/`'rt-b'` are
 * realtime instances); `track(recorded)` closes a recorded client after the test.
 *
 * @example
 * ```ts
 * const each = perTest();
 * it('…', async () => {
 *   const { stack, gateway, 'rt-a': a } = await each.start(['gateway', 'rt-a', 'worker']);
 *   const alice = each.track(record({ url: a.url, getToken: () => stack.token('alice') }));
 * });
 * ```
 */
export function perTest(): {
  start<App extends 'gateway' | 'worker' | 'rt-a' | 'rt-b'>(
    apps: App[],
    extra?: Record<string, string>,
  ): Promise<{ stack: Stack } & Record<App, AppProcess>>;
  track<T extends Recorded>(recorded: T): T;
} {
  let stack: Stack | undefined;
  const clients: Recorded[] = [];
  afterEach(async () => {
    for (const recorded of clients.splice(0)) recorded.client.close();
    await stack?.dispose();
    stack = undefined;
  });
  return {
    async start(apps, extra = {}) {
      const started = new Stack(extra);
      stack = started;
      const processes = await Promise.all(
        apps.map((app) =>
          started.start(app.startsWith('rt-') ? 'realtime' : (app as 'gateway' | 'worker'), app),
        ),
      );
      return Object.assign(
        { stack: started },
        Object.fromEntries(apps.map((app, i) => [app, processes[i]])),
      ) as never;
    },
    track(recorded) {
      clients.push(recorded);
      return recorded;
    },
  };
}
