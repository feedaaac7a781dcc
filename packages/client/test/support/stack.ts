import { createRequire } from 'node:module';
import { signUserToken } from '@herald/protocol';
import { type AppProcess, randomId, redisUrl, startApp, waitFor } from '@herald/testing';

const require = createRequire(import.meta.url);
const entries = {
  gateway: require.resolve('@herald/gateway/server'),
  worker: require.resolve('@herald/worker/server'),
  realtime: require.resolve('@herald/realtime/server'),
};
// 32+ bytes each, as the apps require outside development mode.
export const SECRET = 'client-secret-0123456789abcdef0123456789';
export const API_KEY = 'client-key-0123456789abcdef0123456789abcdef';

/** Gateway, worker and realtime servers of one test, each its own OS process, on random Redis names. */
export class Stack {
  readonly env: Record<string, string>;
  readonly processes: AppProcess[] = [];

  constructor(extra: Record<string, string> = {}) {
    this.env = {
      REDIS_URL: redisUrl(),
      HERALD_API_KEYS: API_KEY,
      HERALD_JWT_SECRET: SECRET,
      HERALD_QUEUE_NAME: randomId('queue'),
      HERALD_PUBSUB_KEY: randomId('pubsub'),
      HERALD_INBOX_PREFIX: `${randomId('inbox')}:`,
      HERALD_RATE_LIMIT_PREFIX: `${randomId('rl')}:`,
      HERALD_KEY_PREFIX: `${randomId('herald')}:`,
      // One job at a time: the inbox order is then the send order, which the tests compare with.
      HERALD_WORKER_CONCURRENCY: '1',
      // The tests send bursts to one user.
      HERALD_RATE_LIMIT_BURST: '1000',
      HERALD_RATE_LIMIT_PER_SECOND: '1000',
      ...extra,
    };
  }

  async start(
    kind: keyof typeof entries,
    name: string,
    env: Record<string, string> = {},
  ): Promise<AppProcess> {
    const app = await startApp({
      name,
      entry: entries[kind],
      env: { ...this.env, HERALD_INSTANCE_ID: name, ...env },
    });
    this.processes.push(app);
    return app;
  }

  /** A user token like `POST /tokens` mints (signed here, so that tests can pick short lifetimes). */
  async token(userId: string, ttlSeconds = 3600): Promise<string> {
    const { token } = await signUserToken({
      tenantId: 'default',
      keyId: 'env-0',
      userId,
      secret: SECRET,
      ttlSeconds,
    });
    return token;
  }

  async dispose(): Promise<void> {
    await Promise.all(this.processes.map((app) => app.stop('SIGKILL', 2000).catch(() => {})));
  }
}

/** Sends `count` notifications to `userId` through the gateway; answers their ids in order. */
export async function notify(
  gateway: AppProcess,
  userId: string,
  count: number,
  from = 0,
): Promise<string[]> {
  const ids: string[] = [];
  for (let n = from; n < from + count; n++) {
    const response = await fetch(`${gateway.url}/notify`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ userId, payload: { n } }),
    });
    if (response.status !== 202) throw new Error(`notify: ${response.status} ${await response.text()}`);
    ids.push(((await response.json()) as { id: string }).id);
  }
  return ids;
}

/** Waits until the worker has appended `id` to `userId`'s inbox (a 202 only says queued). */
export async function appended(gateway: AppProcess, userId: string, id: string | undefined): Promise<void> {
  await waitFor(
    async () => {
      const response = await fetch(
        `${gateway.url}/users/${encodeURIComponent(userId)}/notifications?limit=1000`,
        {
          headers: { authorization: `Bearer ${API_KEY}` },
        },
      );
      const page = (await response.json()) as { items: { id: string }[] };
      return page.items.some((item) => item.id === id);
    },
    { what: `${id} appended` },
  );
}

/** The realtime instance's open sockets (its `/healthz`). */
export async function connections(realtime: AppProcess): Promise<number> {
  const response = await fetch(`${realtime.url}/healthz`);
  return ((await response.json()) as { connections: number }).connections;
}

export { randomId };
