import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { partitionOf, queuePartitions } from '@herald/config';
import { Inbox } from '@herald/inbox';
import {
  type FanoutJob,
  type GoodbyeEvent,
  NOTIFY_JOB_NAME,
  type NotificationEvent,
  type NotificationJob,
  notificationJobOptions,
  type ResyncEvent,
  type SyncedEvent,
  signUserToken,
  type UnreadEvent,
} from '@herald/protocol';
import {
  type AppProcess,
  deleteMatching,
  isolatedEnv,
  onRedisCluster,
  postRetrying503,
  randomId,
  redisUrl as sharedRedisUrl,
  skewedClock,
  startApp,
  testRedis,
  waitFor,
} from '@herald/testing';
import { Queue } from 'bullmq';
import { type Cluster, Redis } from 'ioredis';
import { io, type ManagerOptions, type Socket, type SocketOptions } from 'socket.io-client';

const require = createRequire(import.meta.url);
/** The apps' entry points, started as processes (`node <entry>`). */
export const entries = {
  gateway: require.resolve('@herald/gateway/server'),
  worker: require.resolve('@herald/worker/server'),
  realtime: require.resolve('@herald/realtime/server'),
};
// 32+ bytes each, as the apps require outside development mode.
export const SECRET = 'delivery-secret-0123456789abcdef';
/** A `HERALD_API_KEYS` key (tenant `default`). */
export const API_KEY = 'e2e-key-0123456789abcdef0123456789abcdef';

/** Settings shared by every process of one test stack: random names, so that tests never meet. */
export function stackEnv(redisUrl: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    ...isolatedEnv(redisUrl),
    HERALD_API_KEYS: API_KEY,
    HERALD_JWT_SECRET: SECRET,
    HERALD_INBOX_MAX_LENGTH: '10000',
    HERALD_LOG_LEVEL: 'info',
    ...extra,
  };
}

/** One gateway, one realtime server and one worker, for {@link startApps}. */
export const TRIO = { gateway: 'gateway', realtime: 'realtime', worker: 'worker' } as const;

/**
 * Starts `apps` (name → which app) on `env`, each its own OS process, all at once, and answers them by
 * name. Each is added to `processes` as soon as it is up, so that `afterAll` stops every one started,
 * even when another failed to start.
 *
 * @example
 * ```ts
 * ({ gateway, realtime } = await startApps(env, { gateway: 'gateway', realtime: 'realtime', worker: 'worker' }, processes));
 * ```
 */
export async function startApps<Name extends string>(
  env: Record<string, string>,
  apps: Record<Name, keyof typeof entries>,
  processes: AppProcess[],
): Promise<Record<Name, AppProcess>> {
  const started = await Promise.all(
    (Object.entries(apps) as [Name, keyof typeof entries][]).map(async ([name, kind]) => {
      return [name, await startApp({ name, entry: entries[kind], env, into: processes })] as const;
    }),
  );
  return Object.fromEntries(started) as Record<Name, AppProcess>;
}

/**
 * The app processes and sockets of one `describe`: `start` runs apps as {@link startApps} does, `socket`
 * opens a Socket.IO client (WebSocket only, never reconnecting, its own connection), `track` adds any
 * other client; `stop()`, in its `afterAll`, disconnects every client and stops every process.
 *
 * @example
 * ```ts
 * const apps = new TestApps();
 * beforeAll(async () => ({ gateway, realtime } = await apps.start(env, TRIO)));
 * afterAll(() => apps.stop());
 * ```
 */
export class TestApps {
  readonly processes: AppProcess[] = [];
  readonly #clients: { disconnect(): void }[] = [];

  start<Name extends string>(
    env: Record<string, string>,
    apps: Record<Name, keyof typeof entries>,
  ): Promise<Record<Name, AppProcess>> {
    return startApps(env, apps, this.processes);
  }

  socket(url: string, options: Partial<ManagerOptions & SocketOptions> = {}): Socket {
    return this.track(
      io(url, { transports: ['websocket'], reconnection: false, forceNew: true, ...options }),
    );
  }

  track<Client extends { disconnect(): void }>(client: Client): Client {
    this.#clients.push(client);
    return client;
  }

  async stop(): Promise<void> {
    for (const client of this.#clients) client.disconnect();
    await Promise.all(this.processes.map((app) => app.stop()));
  }
}

/** The processes, queue and inbox of one test: start what you need, `dispose()` stops it all. */
export class Stack {
  readonly env: Record<string, string>;
  readonly redis: Redis | Cluster;
  /** The notification queue's partition 0 (the one queue with `HERALD_QUEUE_PARTITIONS` unset). */
  readonly queue: Queue<NotificationJob>;
  /** Every partition of the notification queue (`HERALD_QUEUE_PARTITIONS` of `extra`), by index. */
  readonly queues: Queue<NotificationJob>[];
  readonly inbox: Inbox;
  readonly processes: AppProcess[] = [];
  readonly clients: TestClient[] = [];

  readonly #ownKeys: boolean;
  readonly #queueConnection: Redis | Cluster | undefined;

  /**
   * `connect`: a client factory for Redis Cluster (default: one Redis at `redisUrl`; the run's Redis
   * Cluster when `redisUrl` is the run's Redis on a `TEST_REDIS_CLUSTER` run, with the apps set for it).
   */
  constructor(redisUrl: string, extra: Record<string, string> = {}, connect?: () => Redis | Cluster) {
    this.env = stackEnv(redisUrl, extra);
    this.#ownKeys = connect === undefined;
    if (connect === undefined && onRedisCluster() && redisUrl === sharedRedisUrl()) {
      connect = () => testRedis({ maxRetriesPerRequest: null });
    }
    // Like the gateway's producer, but patient: the Redis-restart test enqueues across the restart.
    this.redis = connect ? connect() : new Redis(redisUrl, { maxRetriesPerRequest: null });
    this.redis.on('error', () => {});
    this.#queueConnection = connect?.();
    const partitions = queuePartitions({
      name: this.env.HERALD_QUEUE_NAME ?? '',
      prefix: '{herald}',
      partitions: Number(this.env.HERALD_QUEUE_PARTITIONS ?? 1),
    });
    this.queues = partitions.map(({ name, prefix }) => {
      const queue = new Queue<NotificationJob>(name, {
        prefix,
        connection: this.#queueConnection ?? { url: redisUrl, maxRetriesPerRequest: null },
      });
      queue.on('error', () => {});
      return queue;
    });
    this.queue = this.queues[0] as Queue<NotificationJob>;
    this.inbox = new Inbox(this.redis, {
      prefix: this.env.HERALD_INBOX_PREFIX ?? '',
      maxLength: Number(this.env.HERALD_INBOX_MAX_LENGTH),
    });
  }

  /** `port`: the app listens there and is started once it answers `/healthz` (it may never log `listening`). */
  async start(
    kind: keyof typeof entries,
    name: string,
    env: Record<string, string> = {},
    port?: number,
  ): Promise<AppProcess> {
    return await startApp({
      name,
      entry: entries[kind],
      env: { ...this.env, HERALD_INSTANCE_ID: name, ...env },
      into: this.processes,
      ...(port !== undefined ? { port } : {}),
    });
  }

  /**
   * Starts one more `kind` process whose wall clock is off by `skew` (libfaketime, `skewedClock` of
   * @herald/testing, e.g. '+30s' or '-45s'), as on a machine without NTP; Redis keeps the true time.
   */
  async startSkewed(kind: keyof typeof entries, name: string, skew: string): Promise<AppProcess> {
    return await startApp({
      name,
      entry: entries[kind],
      env: { ...this.env, HERALD_INSTANCE_ID: name, ...skewedClock(skew) },
      into: this.processes,
    });
  }

  /** The usual stack: realtime instances `rt-a` and `rt-b` and one worker, each its own OS process. */
  async startDelivery(): Promise<{ a: AppProcess; b: AppProcess; worker: AppProcess }> {
    const [a, b, worker] = await Promise.all([
      this.start('realtime', 'rt-a'),
      this.start('realtime', 'rt-b'),
      this.start('worker', 'worker'),
    ]);
    return { a, b, worker };
  }

  /** The partition of the notification queue that carries `userId`'s notifications (of `tenantId`). */
  queueOf(userId: string, tenantId = 'default'): Queue<NotificationJob> {
    return this.queues[partitionOf(tenantId, userId, this.queues.length)] ?? this.queue;
  }

  /**
   * Enqueues notifications the way the gateway does (job id = notification id, same options, in the
   * user's partition).
   */
  async send(userId: string, count: number, extra: Partial<NotificationJob> = {}): Promise<string[]> {
    const jobs = Array.from({ length: count }, (_, n) => notificationJob(userId, { n }, extra));
    await this.queueOf(userId, extra.tenantId).addBulk(
      jobs.map((job) => ({ name: NOTIFY_JOB_NAME, data: job, opts: notificationJobOptions(job) })),
    );
    return jobs.map((job) => job.id);
  }

  /**
   * A user token like `POST /tokens` mints (signed here, so that tests can pick short lifetimes), with
   * the `topics` the user may subscribe to themselves.
   */
  async token(userId: string, ttlSeconds = 3600, topics?: string[]): Promise<string> {
    const { token } = await signUserToken({
      tenantId: 'default',
      keyId: 'test-key',
      userId,
      secret: SECRET,
      ttlSeconds,
      topics,
    });
    return token;
  }

  client(userId: string, options: { ttlSeconds?: number; now?: Date; tenantId?: string } = {}): TestClient {
    const client = new TestClient(userId, options);
    this.clients.push(client);
    return client;
  }

  async inboxIds(userId: string): Promise<string[]> {
    const ids: string[] = [];
    let after: string | undefined;
    for (;;) {
      const page = await this.inbox.read(userId, { ...(after ? { after } : {}), limit: 1000 });
      ids.push(...page.entries.map((entry) => entry.id));
      // A page stops at 1,000 entries or about 1 MiB (`more`: read on).
      if (!page.more) return ids;
      after = page.lastOffset;
    }
  }

  async dispose(): Promise<void> {
    for (const client of this.clients) client.disconnect();
    await Promise.all(this.processes.map((app) => app.stop('SIGTERM', 5000)));
    try {
      await Promise.all(this.queues.map((queue) => queue.obliterate({ force: true })));
      if (!this.#ownKeys) throw new Error('a cluster of its own: disposed with it');
      await deleteMatching(this.redis, `${this.env.HERALD_INBOX_PREFIX}*`);
    } catch {
      // a test that stopped its Redis for good
    }
    await Promise.all(this.queues.map((queue) => queue.close()));
    this.#queueConnection?.disconnect();
    this.redis.disconnect();
  }
}

export function notificationJob(
  userId: string,
  payload: Record<string, unknown>,
  extra: Partial<NotificationJob> = {},
): NotificationJob {
  return { id: randomUUID(), userId, payload, createdAt: new Date().toISOString(), ...extra };
}

/** A real socket.io-client that records everything the server sends. */
export class TestClient {
  readonly userId: string;
  /** Every `notification` event received, duplicates included (so that tests can see them). */
  readonly received: NotificationEvent[] = [];
  readonly synced: SyncedEvent[] = [];
  readonly resyncs: ResyncEvent[] = [];
  readonly goodbyes: GoodbyeEvent[] = [];
  /** The `unread` event with the highest version so far. */
  unread: UnreadEvent | undefined;
  socket: Socket | undefined;
  disconnectReason: string | undefined;
  #token: Promise<string>;

  constructor(userId: string, options: { ttlSeconds?: number; now?: Date; tenantId?: string } = {}) {
    this.userId = userId;
    this.#token = signUserToken({
      tenantId: options.tenantId ?? 'default',
      keyId: 'test-key',
      userId,
      secret: SECRET,
      ttlSeconds: options.ttlSeconds ?? 3600,
      ...(options.now ? { now: options.now } : {}),
    }).then((t) => t.token);
  }

  /** The offset of the last notification received (what a client passes as `lastOffset`). */
  get lastOffset(): string | undefined {
    return this.received.at(-1)?.offset ?? this.synced.at(-1)?.lastOffset;
  }

  /** Connects and waits for `synced` (the replay is done). */
  async connect(url: string, lastOffset?: string, extraAuth: Record<string, unknown> = {}): Promise<void> {
    this.socket?.disconnect();
    const socket = io(url, {
      auth: { token: await this.#token, ...(lastOffset !== undefined ? { lastOffset } : {}), ...extraAuth },
      transports: ['websocket'],
      reconnection: false,
      forceNew: true,
    });
    this.socket = socket;
    this.disconnectReason = undefined;
    const syncedBefore = this.synced.length;
    socket.on('notification', (event: NotificationEvent) => {
      // What the server sends is what a screen shows: recorded without the live-only unread count.
      const { unread, ...shown } = event;
      this.received.push(shown);
      if (unread) this.#takeUnread(unread);
    });
    socket.on('synced', (event: SyncedEvent) => {
      this.synced.push(event);
      this.#takeUnread(event.unread);
    });
    socket.on('resync', (event: ResyncEvent) => this.resyncs.push(event));
    socket.on('goodbye', (event: GoodbyeEvent) => this.goodbyes.push(event));
    socket.on('unread', (event: UnreadEvent) => this.#takeUnread(event));
    socket.on('disconnect', (reason) => {
      this.disconnectReason = reason;
    });
    await new Promise<void>((resolve, reject) => {
      socket.once('connect_error', reject);
      socket.once('connect', () => resolve());
    });
    await waitFor(() => this.synced.length > syncedBefore, {
      timeoutMs: 30_000,
      what: `synced for ${this.userId}`,
    });
  }

  /** Sends `event` and waits for the server's answer. */
  async command(event: string, body: unknown): Promise<{ ok: boolean; changed?: number; code?: string }> {
    const socket = this.socket;
    if (!socket) throw new Error('not connected');
    return socket.timeout(20_000).emitWithAck(event, body);
  }

  /** Fails unless the notifications received are exactly `expected` (as a set), each once, in offset order. */
  check(expected: readonly string[]): void {
    const ids = this.received.map((event) => event.id);
    const seen = new Set<string>();
    for (const id of ids) {
      if (seen.has(id)) throw new Error(`${this.userId}: notification ${id} received twice`);
      seen.add(id);
    }
    const missing = expected.filter((id) => !seen.has(id));
    if (missing.length > 0 || ids.length !== expected.length) {
      throw new Error(
        `${this.userId}: received ${ids.length} of ${expected.length}; missing ${missing.slice(0, 5).join(',')}…`,
      );
    }
    const seqs = this.received.map((event) => Number(event.offset.split('-')[1]));
    for (let i = 1; i < seqs.length; i++) {
      if (seqs[i] !== (seqs[i - 1] ?? 0) + 1)
        throw new Error(`${this.userId}: out of order or gap at ${i}: ${seqs[i - 1]} then ${seqs[i]}`);
    }
  }

  disconnect(): void {
    this.socket?.disconnect();
  }

  #takeUnread(event: UnreadEvent): void {
    if (this.unread === undefined || event.version > this.unread.version) this.unread = event;
  }
}

/**
 * One call to the gateway at `base` as API key `key` (null: without one), a JSON `body` if given: its
 * status, its JSON body (`{}` when empty) and its headers.
 */
export async function gatewayCall(
  base: string,
  key: string | null,
  method: string,
  path: string,
  options: { body?: unknown; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: Record<string, unknown>; headers: Headers }> {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: {
      ...(key === null ? {} : { authorization: `Bearer ${key}` }),
      ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
      ...options.headers,
    },
    ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
  });
  const text = await response.text();
  return {
    status: response.status,
    body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
    headers: response.headers,
  };
}

/**
 * POSTs `body` to the gateway's `path` (`/notify`, `/notify/batch`) and answers the response, sent again
 * while it is a 503 for up to 10 s (`postRetrying503`).
 */
export function postNotify(gatewayUrl: string, path: string, body: unknown): Promise<Response> {
  return postRetrying503(`${gatewayUrl}${path}`, API_KEY, body);
}

/** Sends `count` notifications to `userId` through the gateway ({@link postNotify}); answers their ids in order. */
export async function notify(
  gateway: AppProcess,
  userId: string,
  count: number,
  from = 0,
): Promise<string[]> {
  const ids: string[] = [];
  for (let n = from; n < from + count; n++) {
    const response = await postNotify(gateway.url, '/notify', { userId, payload: { n } });
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

export { randomId, waitFor };

/**
 * A topic send's job as the gateway enqueues it (`<queue>-fanout`): to `topic`'s subscribers, paid from a
 * sender bucket of its own (1,000 tokens, one prepaid).
 */
export function topicFanoutJob(topic: string, payload: Record<string, unknown>): FanoutJob {
  return {
    id: randomId('fan'),
    tenantId: 'default',
    payload,
    createdAt: new Date().toISOString(),
    audience: { topic },
    charge: {
      keyPrefix: `${randomId('rl')}:sender:`,
      senderId: 'k',
      capacity: 1000,
      ratePerSecond: 1000,
      prepaid: 1,
    },
  };
}
