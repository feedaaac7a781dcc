import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import {
  type AppProcess,
  freePort,
  isolatedEnv,
  launchChromium,
  postRetrying503,
  randomId,
  redisUrl,
  startApp,
} from '@herald/testing';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll } from 'vitest';

const require = createRequire(import.meta.url);
/** The apps, started as processes (`node <entry>`), the web server from this package's build. */
const entries = {
  gateway: require.resolve('@herald/gateway/server'),
  worker: require.resolve('@herald/worker/server'),
  realtime: require.resolve('@herald/realtime/server'),
  web: fileURLToPath(new URL('../../dist/server/server.js', import.meta.url)),
};
// 32+ bytes each, as the apps require outside development mode.
const SECRET = 'web-tests-secret-0123456789abcdef';
export const API_KEY = 'web-tests-key-0123456789abcdef0123456789';

/**
 * The stack as a user runs it, each app its own OS process on its own port: gateway, worker, one
 * realtime server (on a fixed port, so that a test can kill it and start another in its place) and the
 * web server in front of them, in development mode so that the page gets tokens from `POST /dev/token`.
 * Only the web server runs in development mode; the others have real secrets.
 */
export class WebStack {
  readonly env: Record<string, string>;
  readonly processes: AppProcess[] = [];
  realtime: AppProcess | undefined;
  #realtimePort = 0;
  #web: AppProcess | undefined;
  #gateway: AppProcess | undefined;

  constructor(redisUrl: string, extra: Record<string, string> = {}) {
    this.env = {
      ...isolatedEnv(redisUrl),
      HERALD_API_KEYS: API_KEY,
      HERALD_JWT_SECRET: SECRET,
      ...extra,
    };
  }

  /** The page's origin (the web server). */
  get url(): string {
    if (!this.#web) throw new Error('start() first');
    return this.#web.url;
  }

  async start(): Promise<this> {
    this.#realtimePort = await freePort();
    const [gateway, , realtime] = await Promise.all([
      this.#start('gateway', 'gateway'),
      this.#start('worker', 'worker'),
      this.#startRealtime('rt-1'),
    ]);
    this.#gateway = gateway;
    this.realtime = realtime;
    this.#web = await this.#start('web', 'web', {
      HERALD_DEV_MODE: 'true',
      HERALD_DEMO_API_KEY: API_KEY,
      HERALD_GATEWAY_URL: gateway.url,
      HERALD_REALTIME_URL: realtime.url,
    });
    return this;
  }

  /**
   * Sends a notification over HTTP, through the web server's `/api` (the gateway's `POST /notify`), with
   * `extra` fields of the body (`topic`, `type`, …).
   */
  async notify(
    userId: string,
    payload: Record<string, unknown>,
    extra: Record<string, unknown> = {},
  ): Promise<string> {
    const response = await this.#postNotify({ userId, payload, ...extra });
    const body = (await response.json()) as { id?: string };
    if (response.status !== 202 || !body.id)
      throw new Error(`notify answered ${response.status}: ${JSON.stringify(body)}`);
    return body.id;
  }

  /** The server's unread count of `userId` (the gateway's inbox listing). */
  async unread(userId: string): Promise<number> {
    return (await this.#listing(userId)).unread.count;
  }

  /**
   * The ids in `userId`'s inbox, in offset order (oldest first): the order every screen must show.
   * Not always the order they were sent in: workers take queued notifications in parallel.
   */
  async inboxIds(userId: string): Promise<string[]> {
    return (await this.#listing(userId)).items.map((item) => item.id);
  }

  /** Sends `payload` to `topic`'s subscribers, through the web server's `/api`. */
  async notifyTopic(topic: string, payload: Record<string, unknown>): Promise<void> {
    const response = await this.#postNotify({ topic, payload });
    if (response.status !== 202) throw new Error(`notify answered ${response.status}`);
  }

  /**
   * `POST /api/notify` with `body`, sent again while it answers 503 for up to 10 s (`postRetrying503`).
   */
  #postNotify(body: Record<string, unknown>): Promise<Response> {
    return postRetrying503(`${this.url}/api/notify`, API_KEY, body);
  }

  /** `GET /notifications/:id`'s `status` (through the web server's `/api`). */
  async status(id: string): Promise<string> {
    const response = await fetch(`${this.url}/api/notifications/${id}`, {
      headers: { authorization: `Bearer ${API_KEY}` },
    });
    return ((await response.json()) as { status: string }).status;
  }

  async #listing(userId: string): Promise<{ items: { id: string }[]; unread: { count: number } }> {
    if (!this.#gateway) throw new Error('start() first');
    const path = `/users/${encodeURIComponent(userId)}/notifications?limit=1000`;
    const response = await fetch(`${this.#gateway.url}${path}`, {
      headers: { authorization: `Bearer ${API_KEY}` },
    });
    const body = (await response.json()) as { items?: { id: string }[]; unread?: { count: number } };
    // Said with the answer: a CI run once read an error body here as a listing ("reading 'map'").
    if (response.status !== 200 || !body.items || !body.unread)
      throw new Error(`the listing of ${userId} answered ${response.status}: ${JSON.stringify(body)}`);
    return { items: body.items, unread: body.unread };
  }

  /** Kills the realtime server (`SIGKILL`: no goodbye, the sockets just drop). */
  async killRealtime(): Promise<void> {
    await this.realtime?.stop('SIGKILL');
  }

  /** Starts a new realtime server on the same port (the web server's upstream). */
  async startRealtime(name: string): Promise<AppProcess> {
    this.realtime = await this.#startRealtime(name);
    return this.realtime;
  }

  async dispose(): Promise<void> {
    await Promise.all(this.processes.map((app) => app.stop('SIGTERM', 5000)));
  }

  #startRealtime(name: string): Promise<AppProcess> {
    return this.#start('realtime', name, {
      PORT: String(this.#realtimePort),
      // The web server forwards the browser's address (X-Forwarded-For): limits apply per browser.
      HERALD_TRUST_PROXY: '127.0.0.1',
    });
  }

  /** Starts app `kind` as `name` (a random instance id: a restarted one is another instance). */
  #start(kind: keyof typeof entries, name: string, env: Record<string, string> = {}): Promise<AppProcess> {
    const own = { HERALD_INSTANCE_ID: `${name}-${randomId('i')}`, ...env };
    return startApp({ name, entry: entries[kind], env: { ...this.env, ...own }, into: this.processes });
  }
}

/**
 * One stack and one Chromium for a test file (the browser tests' budget: one browser per file, a
 * context per simulated person), started before its tests and stopped after them.
 */
export function stackAndBrowser(extra: Record<string, string> = {}): {
  readonly stack: WebStack;
  readonly browser: Browser;
} {
  const handle = {} as { stack: WebStack; browser: Browser };
  beforeAll(async () => {
    [handle.stack, handle.browser] = await Promise.all([
      new WebStack(redisUrl(), extra).start(),
      launchChromium(),
    ]);
  });
  afterAll(async () => {
    await handle.browser?.close();
    await handle.stack?.dispose();
  });
  return handle;
}
