import { fileURLToPath } from 'node:url';
import { queuePartitions } from '@herald/config';
import { inboxKeys, tenantPrefix } from '@herald/inbox';
import {
  fanoutQueueName,
  NOTIFY_JOB_NAME,
  type NotificationJob,
  notificationJobOptions,
  type WebhookPayload,
} from '@herald/protocol';
import {
  type AppProcess,
  deleteMatching,
  queueConnection,
  redisUrl,
  scrapeMetrics,
  startApp,
  testRedis,
  waitFor,
} from '@herald/testing';
import { type Job, Queue } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CreatedKey, createKey, herald } from './support/cli.js';
import { gatewayCall, notificationJob, stackEnv, TestApps, TestClient, TRIO } from './support/stack.js';

const ADMIN_KEY = 'webhooks-admin-key-0123456789abcdef0123';
const RECEIVER = fileURLToPath(new URL('./support/webhook-receiver.mjs', import.meta.url));

/** What the receiver process recorded of one request. */
interface Received {
  id: string;
  timestamp: string;
  signature: string;
  contentType: string;
  verified: boolean;
  error?: string;
  /** What the receiver answered: 204, 400 (bad signature), 500, or 0 (it never answered). */
  status: number;
  payload: WebhookPayload;
}

describe('delivery webhooks: gateway, worker, realtime and a receiver, each its own process', () => {
  // Loopback receivers are allowed explicitly (the default refuses them: SSRF), and retries are quick.
  const env = stackEnv(redisUrl(), {
    HERALD_ADMIN_KEY: ADMIN_KEY,
    // 12 notifications to one user in a row (the isolation test) fit the recipient bucket.
    HERALD_RATE_LIMIT_BURST: '100',
    HERALD_WEBHOOK_ALLOW_PRIVATE: 'true',
    HERALD_WEBHOOK_ATTEMPTS: '10',
    HERALD_WEBHOOK_BACKOFF_MS: '100',
    HERALD_WEBHOOK_TIMEOUT_MS: '1500',
    HERALD_WEBHOOK_PARK_AFTER: '4',
    HERALD_WEBHOOK_CONCURRENCY: '4',
    HERALD_WEBHOOK_ENDPOINT_CONCURRENCY: '2',
  });
  const apps = new TestApps();
  let gateway: AppProcess;
  let realtime: AppProcess;
  let worker: AppProcess;
  let receiver: AppProcess;
  let redis: Redis | Cluster;
  let queue: Queue<NotificationJob>;
  let fanoutQueue: Queue;
  /** Every partition of the notification queue (a delayed send waits in its user's). */
  let partitions: Queue[];
  const keys = new Map<string, CreatedKey>();
  const tenants = ['acme', 'globex', 'retry', 'parked', 'slow', 'fast', 'topical', 'broken'] as const;
  type Tenant = (typeof tenants)[number];

  beforeAll(async () => {
    redis = testRedis();
    queue = new Queue(env.HERALD_QUEUE_NAME ?? '', { prefix: '{herald}', connection: queueConnection() });
    fanoutQueue = new Queue(fanoutQueueName(env.HERALD_QUEUE_NAME ?? ''), {
      prefix: '{herald}',
      connection: queueConnection(),
    });
    partitions = queuePartitions({
      name: env.HERALD_QUEUE_NAME ?? '',
      prefix: '{herald}',
      partitions: Number(env.HERALD_QUEUE_PARTITIONS ?? 1),
    }).map(({ name, prefix }) => new Queue(name, { prefix, connection: queueConnection() }));
    const created = await Promise.all(tenants.map((tenant) => createKey(env, tenant)));
    for (const [index, tenant] of tenants.entries()) keys.set(tenant, created[index] as CreatedKey);
    [receiver, { gateway, realtime, worker }] = await Promise.all([
      startApp({ name: 'receiver', entry: RECEIVER, env: {}, into: apps.processes }),
      apps.start(env, TRIO),
    ]);
  });

  afterAll(async () => {
    await apps.stop();
    await queue.obliterate({ force: true }).catch(() => {});
    await fanoutQueue.obliterate({ force: true }).catch(() => {});
    await Promise.all([fanoutQueue, ...partitions].map((each) => each.close()));
    const webhookQueue = new Queue(`${env.HERALD_QUEUE_NAME}-webhooks`, {
      prefix: '{herald}',
      connection: queueConnection(),
    });
    await webhookQueue.obliterate({ force: true }).catch(() => {});
    await Promise.all([queue.close(), webhookQueue.close()]);
    for (const prefix of [env.HERALD_KEY_PREFIX, env.HERALD_INBOX_PREFIX, env.HERALD_RATE_LIMIT_PREFIX]) {
      await deleteMatching(redis, `${prefix}*`);
    }
    redis.disconnect();
  });

  const keyOf = (tenant: Tenant) => keys.get(tenant)?.key ?? '';

  async function call(key: string, method: string, path: string, body?: unknown) {
    const { status, body: answer } = await gatewayCall(gateway.url, key, method, path, { body });
    return { status, body: answer };
  }

  async function control(name: string, settings: Record<string, unknown>): Promise<void> {
    const response = await fetch(`${receiver.url}/control/${name}`, {
      method: 'POST',
      body: JSON.stringify(settings),
    });
    expect(response.status).toBe(200);
  }

  async function received(name: string): Promise<{ requests: Received[]; open: number; maxOpen: number }> {
    return (await (await fetch(`${receiver.url}/control/${name}`)).json()) as {
      requests: Received[];
      open: number;
      maxOpen: number;
    };
  }

  /** Sets `tenant`'s webhook to the receiver's `/hook/<tenant>` and tells the receiver its secret. */
  async function subscribe(tenant: Tenant, receiverSettings: Record<string, unknown> = {}): Promise<void> {
    const answer = await call(keyOf(tenant), 'PUT', '/webhook', { url: `${receiver.url}/hook/${tenant}` });
    expect(answer.status, JSON.stringify(answer.body)).toBe(201);
    expect(answer.body.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    await control(tenant, { secret: answer.body.secret, ...receiverSettings });
  }

  /** Sets the `ttlMs` of job `id` (in one of `targets`, still delayed) to `ttlMs`: a send whose ttl passes before its delay. */
  async function shortenTtl(targets: readonly Queue[], id: string, ttlMs: number): Promise<void> {
    let job: Job | undefined;
    for (const target of targets) job ??= await target.getJob(id);
    if (job === undefined) throw new Error(`no job ${id}`);
    expect(await job.getState()).toBe('delayed');
    await job.updateData({ ...job.data, ttlMs });
  }

  async function send(tenant: Tenant, userId: string, extra: Record<string, unknown> = {}): Promise<string> {
    const answer = await call(keyOf(tenant), 'POST', '/notify', {
      userId,
      payload: { to: userId },
      ...extra,
    });
    expect(answer.status, JSON.stringify(answer.body)).toBe(202);
    return answer.body.id as string;
  }

  /** Sends `count` notifications to `userId`, waits until they are stored, then marks them read by REST. */
  async function readEvents(tenant: Tenant, userId: string, count: number): Promise<string[]> {
    const ids: string[] = [];
    for (let n = 0; n < count; n++) ids.push(await send(tenant, userId));
    await waitFor(
      async () => {
        const page = await call(keyOf(tenant), 'GET', `/users/${userId}/notifications?limit=1000`);
        return (page.body.items as unknown[]).length === count;
      },
      { what: `${count} notifications of ${tenant} stored` },
    );
    const read = await call(keyOf(tenant), 'POST', `/users/${userId}/notifications/read`, { ids });
    expect(read.body).toMatchObject({ changed: count });
    return ids;
  }

  /** The notifications whose `type` event the receiver accepted (204), by notification id. */
  const accepted = (requests: Received[], type: string) =>
    new Set(
      requests
        .filter((r) => r.status === 204 && r.payload.type === type)
        .map((r) => r.payload.data.notificationId),
    );

  it('sends every event, signed (Standard Webhooks, verified by the reference library), once per fact', async () => {
    await subscribe('acme');
    const client = apps.track(new TestClient('alice', { tenantId: 'acme' }));
    await client.connect(realtime.url);
    // delivered + read through the socket
    const shown = await send('acme', 'alice');
    await waitFor(() => client.received.some((event) => event.id === shown), { what: 'alice got it' });
    expect(await client.command('ack', { ids: [shown] })).toMatchObject({ ok: true, changed: 1 });
    expect(await client.command('ack', { ids: [shown] })).toMatchObject({ ok: true, changed: 0 });
    expect(await client.command('read', { ids: [shown] })).toMatchObject({ ok: true, changed: 1 });
    // read through REST
    const [readByApi] = await readEvents('acme', 'bob', 1);
    // expired: its ttl passes before its delay does (a send can no longer ask for that: its ttl is
    // shortened in its job while it waits, as if its worker had been that late)
    const expired = await send('acme', 'carol', { delayMs: 1500, ttlMs: 60_000 });
    await shortenTtl(partitions, expired, 1000);
    // failed for good: a job the worker can never store (an empty user id) fails without retries
    const broken = notificationJob('', { n: 1 }, { tenantId: 'acme' });
    await queue.add(NOTIFY_JOB_NAME, broken, notificationJobOptions(broken));

    const expected: [string, string | undefined, string][] = [
      ['notification.delivered', shown, 'alice'],
      ['notification.read', shown, 'alice'],
      ['notification.read', readByApi, 'bob'],
      ['notification.expired', expired, 'carol'],
      ['notification.failed', broken.id, ''],
    ];
    const all = await waitFor(
      async () => {
        const { requests } = await received('acme');
        return expected.every(([type, id]) => accepted(requests, type).has(id ?? '')) ? requests : undefined;
      },
      { what: 'all five events at the receiver', timeoutMs: 30_000 },
    );
    for (const request of all) {
      expect(request, JSON.stringify(request)).toMatchObject({ verified: true, status: 204 });
      expect(request.contentType).toBe('application/json');
      expect(request.id).toMatch(/^msg_[A-Za-z0-9_-]{27}$/);
      expect(request.signature).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
      expect(Number.isInteger(Number(request.timestamp))).toBe(true);
    }
    for (const [type, id, userId] of expected) {
      const request = all.find((r) => r.payload.type === type && r.payload.data.notificationId === id);
      expect(request?.payload.data).toMatchObject({ notificationId: id, userId });
      expect(Number.isNaN(Date.parse(request?.payload.data.at ?? ''))).toBe(false);
    }
    const failed = all.find((r) => r.payload.type === 'notification.failed');
    expect(failed?.payload.data.reason).toContain('HERALD_ERR_INBOX_INVALID_ARGUMENT');
    // The second ack recorded nothing, so it reported nothing: one delivered message for the notification.
    expect(all.filter((r) => r.payload.type === 'notification.delivered')).toHaveLength(1);
  });

  it("a topic send: each recipient's read, and each one's expiry, is an event of its own with its own webhook-id", async () => {
    await subscribe('topical');
    const users = ['ann', 'ben', 'cat'];
    const key = keyOf('topical');
    expect((await call(key, 'PUT', '/topics/news/subscribers', { userIds: users })).status).toBe(200);
    const sendTopic = async (extra: object) =>
      (await call(key, 'POST', '/notify', { topic: 'news', payload: { n: 1 }, ...extra })).body.id as string;
    const read = await sendTopic({});
    // Its ttl passes before its delay does (shortened in its job while it waits, as in the test above):
    // every recipient is reached after it, recorded expired.
    const expired = await sendTopic({ delayMs: 1500, ttlMs: 60_000 });
    await shortenTtl([fanoutQueue], expired, 1000);
    const sent = async (id: string) =>
      (await call(key, 'GET', `/notifications/${id}`)).body.status === 'sent';
    await waitFor(async () => (await sent(read)) && (await sent(expired)), { what: 'both fanned out' });
    for (const userId of users) {
      expect(
        (await call(key, 'POST', `/users/${userId}/notifications/read`, { ids: [read] })).body,
      ).toMatchObject({
        changed: 1,
      });
    }
    // One notification id, three recipients, three facts: the same webhook-id for each would be one message.
    const events = (all: Received[], type: string, id: string) =>
      all.filter((r) => r.status === 204 && r.payload.type === type && r.payload.data.notificationId === id);
    for (const [type, id] of [
      ['notification.read', read],
      ['notification.expired', expired],
    ] as const) {
      const requests = await waitFor(
        async () => {
          const found = events((await received('topical')).requests, type, id);
          return found.length >= users.length ? found : undefined;
        },
        { what: `each recipient's ${type} event` },
      );
      expect(requests.map((r) => r.payload.data.userId).sort(), type).toEqual(users);
      expect(new Set(requests.map((r) => r.id)).size, type).toBe(users.length);
    }
  });

  it('a topic send one of whose recipients has an inbox Redis refuses: that one is failed (status, event), the others get it', async () => {
    await subscribe('broken');
    const key = keyOf('broken');
    const users = ['dan', 'eve', 'fay'];
    expect((await call(key, 'PUT', '/topics/alerts/subscribers', { userIds: users })).status).toBe(200);
    // eve's inbox stream is a string: Redis refuses every append to it (WRONGTYPE).
    const stream = inboxKeys(tenantPrefix(env.HERALD_INBOX_PREFIX ?? '', 'broken'), 'eve').stream;
    await redis.set(stream, 'not a stream');
    const id = (await call(key, 'POST', '/notify', { topic: 'alerts', payload: { n: 1 } })).body.id as string;
    const status = await waitFor(
      async () => {
        const answer = await call(key, 'GET', `/notifications/${id}`);
        return answer.body.status === 'sent' ? answer.body : undefined;
      },
      { what: 'the topic send to be sent', timeoutMs: 30_000 },
    );
    expect(status.recipients).toEqual({
      total: 3,
      reached: 2,
      expired: 0,
      deduplicated: 0,
      muted: 0,
      failed: 1,
    });
    const eve = await call(key, 'GET', `/notifications/${id}?userId=eve`);
    expect(eve.status).toBe(200);
    expect(eve.body).toMatchObject({ id, userId: 'eve', status: 'failed' });
    expect(eve.body.failedReason).toMatch(/WRONGTYPE/);
    expect((await call(key, 'GET', `/notifications/${id}?userId=dan`)).body).toMatchObject({
      status: 'queued',
    });
    const failed = await waitFor(
      async () =>
        (await received('broken')).requests.find(
          (r) =>
            r.status === 204 &&
            r.payload.type === 'notification.failed' &&
            r.payload.data.notificationId === id,
        ),
      { what: "eve's notification.failed event" },
    );
    expect(failed.payload.data).toMatchObject({ notificationId: id, userId: 'eve', attempts: 1 });
    expect(failed.payload.data.reason).toMatch(/WRONGTYPE/);
    expect(
      (await received('broken')).requests.filter((r) => r.payload.type === 'notification.failed'),
    ).toHaveLength(1);
  });

  it('retries after 500s with the same webhook-id, each attempt signed anew, and then delivers', async () => {
    await subscribe('retry', { failFirst: 2 });
    const [id] = await readEvents('retry', 'dave', 1);
    const requests = await waitFor(
      async () => {
        const { requests } = await received('retry');
        return requests.some((r) => r.status === 204) ? requests : undefined;
      },
      { what: 'the third attempt accepted' },
    );
    expect(requests.map((r) => r.status)).toEqual([500, 500, 204]);
    expect(new Set(requests.map((r) => r.id)).size).toBe(1);
    expect(requests.every((r) => r.verified && r.payload.data.notificationId === id)).toBe(true);
    // The receiver has answered; the worker records the success once it has read that answer.
    const webhook = await waitFor(
      async () => {
        const answer = await call(keyOf('retry'), 'GET', '/webhook');
        return answer.body.lastSuccessAt ? answer : undefined;
      },
      { what: 'the success recorded' },
    );
    expect(webhook.body).toMatchObject({ state: 'active', consecutiveFailures: 0 });
    expect(webhook.body.lastSuccessAt).toEqual(expect.any(String));
  });

  it('parks an endpoint after HERALD_WEBHOOK_PARK_AFTER failures in a row, holds its events, and resume sends them all', async () => {
    await subscribe('parked', { mode: 'fail' });
    const first = await readEvents('parked', 'erin', 2);
    const parked = await waitFor(
      async () => {
        const answer = await call(keyOf('parked'), 'GET', '/webhook');
        return answer.body.state === 'parked' && answer.body.held === 2 ? answer.body : undefined;
      },
      { what: 'parked with both messages held', timeoutMs: 30_000 },
    );
    expect(parked.consecutiveFailures).toBeGreaterThanOrEqual(4);
    expect(parked.lastError).toMatch(/HTTP 500/);
    const attempts = (await received('parked')).requests.length;
    // While parked, a new event is held without an attempt.
    const [later] = await readEvents('parked', 'erin-2', 1);
    await waitFor(async () => (await call(keyOf('parked'), 'GET', '/webhook')).body.held === 3, {
      what: 'the new event held',
    });
    expect((await received('parked')).requests).toHaveLength(attempts);
    // The operator sees it (admin API and CLI), the receiver is fixed, and resume sends what was held.
    const listed = await call(ADMIN_KEY, 'GET', '/admin/webhooks');
    expect(listed.body.webhooks).toContainEqual(
      expect.objectContaining({ tenantId: 'parked', state: 'parked', held: 3 }),
    );
    const shown = await herald(['webhooks', 'show', 'parked'], env);
    expect(shown.out).toMatch(/PARKED since/);
    await control('parked', { mode: 'ok' });
    const resumed = await herald(['webhooks', 'resume', 'parked'], env);
    expect(resumed, resumed.out).toMatchObject({ code: 0 });
    expect(resumed.out).toContain('3 held message(s) queued again');
    await waitFor(
      async () => {
        const delivered = accepted((await received('parked')).requests, 'notification.read');
        return [...first, later].every((id) => delivered.has(id ?? ''));
      },
      { what: 'every held message delivered after resume' },
    );
    expect((await call(keyOf('parked'), 'GET', '/webhook')).body).toMatchObject({ state: 'active', held: 0 });
    expect((await call(keyOf('parked'), 'POST', '/webhook/resume')).body).toMatchObject({
      code: 'HERALD_ERR_WEBHOOK_NOT_PARKED',
    });
  });

  it('a hanging endpoint holds at most HERALD_WEBHOOK_ENDPOINT_CONCURRENCY slots: another tenant gets every event meanwhile', async () => {
    await subscribe('slow', { mode: 'hang' });
    await subscribe('fast');
    // The slow tenant's events are queued first: 12 POSTs that never get an answer, 4 worker slots.
    await readEvents('slow', 'frank', 12);
    await waitFor(async () => (await received('slow')).open > 0, { what: 'the slow endpoint hanging' });
    const fast = await readEvents('fast', 'grace', 12);
    await waitFor(
      async () => {
        const delivered = accepted((await received('fast')).requests, 'notification.read');
        return fast.every((id) => delivered.has(id));
      },
      { what: 'all 12 events of the healthy tenant delivered' },
    );
    const slow = await received('slow');
    expect(slow.maxOpen).toBeLessThanOrEqual(2);
    // The worker had slow messages wait for the endpoint's slots rather than take the other two.
    const runs = (await scrapeMetrics(`${worker.url}/metrics`)).get('herald_worker_webhooks_total');
    const busy = runs?.metrics.find((metric) => metric.labels?.outcome === 'busy');
    expect(Number(busy?.value ?? 0)).toBeGreaterThan(0);
    expect(slow.requests.every((r) => r.verified)).toBe(true);
    // The hanging endpoint times out until it is parked, and its events wait there, none lost.
    await waitFor(
      async () => {
        const answer = await call(keyOf('slow'), 'GET', '/webhook');
        return answer.body.state === 'parked' && answer.body.held === 12;
      },
      { what: 'the slow endpoint parked with all 12 held', timeoutMs: 30_000 },
    );
    expect((await call(keyOf('slow'), 'GET', '/webhook')).body.lastError).toMatch(/no answer within 1500 ms/);
  });

  it('a tenant reads and changes only its own webhook; the operator reaches any by tenant id', async () => {
    const url = `${receiver.url}/hook/globex`;
    // globex has none, although acme has one: its key never sees acme's.
    expect(await call(keyOf('globex'), 'GET', '/webhook')).toMatchObject({
      status: 404,
      body: { code: 'HERALD_ERR_NOT_FOUND' },
    });
    const created = await call(keyOf('globex'), 'PUT', '/webhook', { url, events: ['notification.read'] });
    expect(created.status).toBe(201);
    const acme = await call(keyOf('acme'), 'GET', '/webhook');
    expect(acme.body).toMatchObject({ tenantId: 'acme', url: `${receiver.url}/hook/acme` });
    expect(acme.body).not.toHaveProperty('secret');
    // An update keeps the secret (200, none shown); a rotation shows a new one.
    const updated = await call(keyOf('globex'), 'PUT', '/webhook', { url: `${url}-2` });
    expect(updated.status).toBe(200);
    expect(updated.body).not.toHaveProperty('secret');
    const rotated = await call(keyOf('globex'), 'POST', '/webhook/rotate-secret');
    expect(rotated.body.secret).toMatch(/^whsec_/);
    expect(rotated.body.secret).not.toBe(created.body.secret);
    expect(rotated.body.previousSecretUntil).toEqual(expect.any(String));
    // globex deleting deletes its own only.
    expect((await call(keyOf('globex'), 'DELETE', '/webhook')).status).toBe(204);
    expect((await call(keyOf('globex'), 'DELETE', '/webhook')).status).toBe(404);
    expect((await call(keyOf('acme'), 'GET', '/webhook')).status).toBe(200);
    // The admin routes take the admin key, never a tenant's.
    expect((await call(keyOf('acme'), 'GET', '/admin/tenants/globex/webhook')).status).toBe(401);
    expect((await call(keyOf('acme'), 'GET', '/admin/webhooks')).status).toBe(401);
    const byAdmin = await call(ADMIN_KEY, 'PUT', '/admin/tenants/globex/webhook', { url });
    expect(byAdmin.status).toBe(201);
    expect((await call(keyOf('globex'), 'GET', '/webhook')).body).toMatchObject({ tenantId: 'globex', url });
    expect((await call(ADMIN_KEY, 'GET', '/admin/tenants/acme/webhook')).body).toMatchObject({
      tenantId: 'acme',
    });
    expect((await call(ADMIN_KEY, 'DELETE', '/admin/tenants/globex/webhook')).status).toBe(204);
    // And through the CLI, as an operator would.
    const set = await herald(['webhooks', 'set', 'globex', url, '--events', 'notification.failed'], env);
    expect(set, set.out).toMatchObject({ code: 0 });
    expect(set.out).toMatch(/secret: whsec_/);
    expect((await call(keyOf('globex'), 'GET', '/webhook')).body).toMatchObject({
      events: ['notification.failed'],
    });
    // What a command does not take is refused before anything is done, never ignored.
    for (const args of [
      ['delete', 'globex', 'acme'],
      ['set', 'globex', url, 'extra'],
      ['delete', 'globex', '--events', 'notification.failed'],
    ]) {
      const refused = await herald(['webhooks', ...args], env);
      expect(refused.code, args.join(' ')).toBe(2);
      expect(refused.out, args.join(' ')).toMatch(/takes|--events/);
    }
    const unknownArea = await herald(['webhook', 'show', 'globex'], env);
    expect(unknownArea.code).toBe(2);
    expect(unknownArea.out).toMatch(/^unknown area "webhook"/);
    expect((await herald(['webhooks', 'show', 'globex'], env)).code).toBe(0);
    expect((await herald(['webhooks', 'delete', 'globex'], env)).code).toBe(0);
    expect((await herald(['webhooks', 'show', 'globex'], env)).code).toBe(1);
    // `herald webhooks set … | head -1`: the reader leaves after the first line. The command still
    // finishes, quietly (no EPIPE crash, exit 0), and the webhook is set.
    const piped = await herald(['webhooks', 'set', 'globex', url], env, { firstLineOnly: true });
    expect(piped, piped.out).toMatchObject({ code: 0, err: '' });
    expect((await call(keyOf('globex'), 'GET', '/webhook')).body).toMatchObject({ tenantId: 'globex', url });
  });
});
