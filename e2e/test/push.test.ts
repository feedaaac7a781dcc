import { createECDH, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Inbox } from '@herald/inbox';
import {
  ErrorCode,
  type EscalationStatus,
  type PushMessage,
  type PushSubscribeReply,
  type PushSubscriptionJSON,
} from '@herald/protocol';
import { EscalationRecords, escalationQueueName, PushSubscriptions } from '@herald/push';
import {
  type AppProcess,
  deleteMatching,
  loopbackCertificate,
  queueConnection,
  redisUrl,
  startApp,
  testRedis,
  waitFor,
} from '@herald/testing';
import { Queue } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_KEY, entries, gatewayCall, stackEnv, startApps, TestClient, TRIO } from './support/stack.js';

const RECEIVER = fileURLToPath(new URL('./support/push-receiver.mjs', import.meta.url));

/** What the push receiver process recorded of one push. */
interface Pushed {
  contentEncoding: string;
  ttl: string;
  urgency: string;
  vapid: { claims?: { aud: string; sub: string; exp: number }; error?: string };
  message?: PushMessage;
  error?: string;
  status: number;
}

describe('Web Push escalation: gateway, worker, realtime and a push service, each its own process', () => {
  const dir = mkdtempSync(join(tmpdir(), 'herald-push-'));
  // The push service's own certificate for 127.0.0.1; the worker trusts it as an extra CA.
  const { cert, key } = loopbackCertificate(dir);
  const vapid = createECDH('prime256v1');
  vapid.generateKeys();
  const vapidPublicKey = vapid.getPublicKey('base64url');
  // A real key pair (not development mode); loopback push endpoints allowed explicitly (tests only).
  const env = stackEnv(redisUrl(), {
    HERALD_VAPID_PUBLIC_KEY: vapidPublicKey,
    HERALD_VAPID_PRIVATE_KEY: vapid.getPrivateKey('base64url'),
    HERALD_VAPID_SUBJECT: 'mailto:ops@example.com',
    HERALD_PUSH_ALLOW_PRIVATE: 'true',
    HERALD_RATE_LIMIT_BURST: '100',
    NODE_EXTRA_CA_CERTS: cert,
  });
  const processes: AppProcess[] = [];
  const clients: TestClient[] = [];
  let trio: Record<keyof typeof TRIO, AppProcess>;
  let receiver: AppProcess;
  let redis: Redis | Cluster;
  let escalations: Queue;
  let store: PushSubscriptions;
  let inbox: Inbox;

  beforeAll(async () => {
    redis = testRedis();
    escalations = new Queue(escalationQueueName(env.HERALD_QUEUE_NAME ?? ''), {
      prefix: '{herald}',
      connection: queueConnection(),
    });
    store = new PushSubscriptions(redis, env.HERALD_INBOX_PREFIX ?? '');
    inbox = new Inbox(redis, { prefix: env.HERALD_INBOX_PREFIX ?? '' });
    [receiver, trio] = await Promise.all([
      startApp({
        name: 'push-service',
        entry: RECEIVER,
        env: { PUSH_RECEIVER_CERT: cert, PUSH_RECEIVER_KEY: key },
        into: processes,
      }),
      startApps(env, TRIO, processes),
    ]);
  });

  afterAll(async () => {
    for (const client of clients) client.disconnect();
    await Promise.all(processes.map((process) => process.stop()));
    for (const name of [env.HERALD_QUEUE_NAME ?? '', escalationQueueName(env.HERALD_QUEUE_NAME ?? '')]) {
      const queue = new Queue(name, { prefix: '{herald}', connection: queueConnection() });
      await queue.obliterate({ force: true }).catch(() => {});
      await queue.close();
    }
    await escalations.close();
    for (const prefix of [env.HERALD_KEY_PREFIX, env.HERALD_INBOX_PREFIX, env.HERALD_RATE_LIMIT_PREFIX]) {
      await deleteMatching(redis, `${prefix}*`);
    }
    redis.disconnect();
    rmSync(dir, { recursive: true, force: true });
  });

  /** One call to the push service's control endpoint (over its https, trusting its certificate). */
  function control(name: string, body?: unknown): Promise<{ requests: Pushed[] }> {
    return new Promise((resolve, reject) => {
      const call = request(
        `https://127.0.0.1:${receiver.port}/control/${name}`,
        { method: body === undefined ? 'GET' : 'POST', ca: readFileSync(cert) },
        (response) => {
          let text = '';
          response.on('data', (chunk: Buffer) => {
            text += chunk.toString();
          });
          response.on('end', () => resolve(JSON.parse(text) as { requests: Pushed[] }));
        },
      );
      call.on('error', reject);
      call.end(body === undefined ? undefined : JSON.stringify(body));
    });
  }

  /** A browser's push subscription at the push service: its keys (the receiver decrypts with them). */
  async function browser(
    name: string,
    mode: 'ok' | 'gone' = 'ok',
    failFirst = 0,
  ): Promise<PushSubscriptionJSON> {
    const ecdh = createECDH('prime256v1');
    ecdh.generateKeys();
    const auth = randomBytes(16).toString('base64url');
    await control(name, {
      privateKey: ecdh.getPrivateKey('base64url'),
      publicKey: ecdh.getPublicKey('base64url'),
      auth,
      vapidPublicKey,
      mode,
      failFirst,
    });
    return {
      endpoint: `https://127.0.0.1:${receiver.port}/push/${name}`,
      expirationTime: null,
      keys: { p256dh: ecdh.getPublicKey('base64url'), auth },
    };
  }

  async function connect(userId: string, options: { tenantId?: string } = {}): Promise<TestClient> {
    const client = new TestClient(userId, options);
    clients.push(client);
    await client.connect(trio.realtime.url);
    return client;
  }

  function emit(client: TestClient, event: string, body: unknown): Promise<PushSubscribeReply> {
    const socket = client.socket;
    if (!socket) throw new Error('not connected');
    return socket.timeout(20_000).emitWithAck(event, body);
  }

  async function send(userId: string, extra: Record<string, unknown>): Promise<string> {
    const answer = await gatewayCall(trio.gateway.url, API_KEY, 'POST', '/notify', {
      body: { userId, payload: { title: `for ${userId}`, url: '/orders/1042' }, ...extra },
    });
    expect(answer.status).toBe(202);
    return answer.body.id as string;
  }

  /** The worker's `herald_worker_<what>_total{outcome}` (each test checks the one it caused). */
  async function counted(what: 'escalations' | 'pushes', outcome: string): Promise<number> {
    const metrics = await (await fetch(`${trio.worker.url}/metrics`)).text();
    const line = metrics
      .split('\n')
      .find((row) => row.startsWith(`herald_worker_${what}_total{outcome="${outcome}"}`));
    return Number(line?.split(' ')[1] ?? 0);
  }

  async function escalation(id: string, state: EscalationStatus['state']): Promise<EscalationStatus> {
    let found: EscalationStatus | undefined;
    await waitFor(
      async () => {
        const answer = await gatewayCall(trio.gateway.url, API_KEY, 'GET', `/notifications/${id}`);
        found = answer.body.escalation as EscalationStatus | undefined;
        return found?.state === state;
      },
      { timeoutMs: 30_000, what: `escalation of ${id} ${state} (last: ${JSON.stringify(found)})` },
    );
    return found as EscalationStatus;
  }

  it('not acked in time: the push service gets the notification, encrypted for the browser and VAPID-signed; the status says pushed', async () => {
    const alice = await connect('alice');
    expect(await emit(alice, 'push-subscribe', { subscription: await browser('alice') })).toEqual({
      ok: true,
      subscriptions: 1,
    });
    const id = await send('alice', { escalateAfterMs: 1000 });
    // The tab shows it and never acks (the page was in the background, say).
    await waitFor(() => alice.received.some((event) => event.id === id), { what: 'alice got it live' });
    const record = await escalation(id, 'pushed');
    expect(record).toMatchObject({ sent: 1, failed: 0 });
    const { requests } = await control('alice');
    expect(requests).toHaveLength(1);
    const [pushed] = requests as [Pushed];
    expect(pushed.error).toBeUndefined();
    expect(pushed.vapid.error).toBeUndefined();
    expect(pushed.vapid.claims).toMatchObject({
      aud: `https://127.0.0.1:${receiver.port}`,
      sub: 'mailto:ops@example.com',
    });
    expect(pushed).toMatchObject({ contentEncoding: 'aes128gcm', urgency: 'high', status: 201 });
    const live = alice.received.find((event) => event.id === id);
    // The decrypted message is the notification the socket got: same id, offset, payload.
    expect(pushed.message).toEqual({ kind: 'herald.notification', ...live });
    expect(await counted('escalations', 'pushed')).toBeGreaterThan(0);
    expect(await counted('pushes', 'sent')).toBeGreaterThan(0);
  });

  it('acked before its deadline: the ack cancels it, the status says acked, nothing reaches the push service', async () => {
    const bob = await connect('bob');
    await emit(bob, 'push-subscribe', { subscription: await browser('bob') });
    const id = await send('bob', { escalateAfterMs: 60_000 });
    await waitFor(() => bob.received.some((event) => event.id === id), { what: 'bob got it live' });
    expect(await bob.command('ack', { ids: [id] })).toMatchObject({ ok: true, changed: 1 });
    expect(await escalation(id, 'acked')).toMatchObject({ at: expect.any(String) });
    // Removed from the queue, not just skipped later.
    expect(await escalations.getJob(id)).toBeUndefined();
    expect((await control('bob')).requests).toEqual([]);
  });

  it('acked when it fires (the job could not be removed): the worker sees the ack and sends nothing', async () => {
    const carol = await connect('carol');
    await emit(carol, 'push-subscribe', { subscription: await browser('carol') });
    // Paused: the escalation waits until the ack is in, however slow this machine is.
    await escalations.pause();
    let id = '';
    try {
      id = await send('carol', { escalateAfterMs: 1000 });
      await waitFor(async () => (await escalations.getJob(id)) !== undefined, { what: 'escalation queued' });
      // An ack written straight into the inbox (as by a realtime instance that could not reach the queue).
      expect(await inbox.ack('carol', [id], 'test')).toBe(1);
    } finally {
      await escalations.resume();
    }
    expect(await escalation(id, 'acked')).toMatchObject({ at: expect.any(String) });
    expect((await control('carol')).requests).toEqual([]);
  });

  it('a 410 from the push service removes that subscription; the others still get it', async () => {
    const dave = await connect('dave');
    const gone = await browser('dave-old', 'gone');
    const current = await browser('dave-new');
    await emit(dave, 'push-subscribe', { subscription: gone });
    expect(await emit(dave, 'push-subscribe', { subscription: current })).toMatchObject({ subscriptions: 2 });
    const id = await send('dave', { escalateAfterMs: 1000 });
    expect(await escalation(id, 'pushed')).toMatchObject({ sent: 1, failed: 1 });
    expect(await store.list('default', 'dave')).toEqual([current]);
    expect((await control('dave-old')).requests).toHaveLength(1);
    expect((await control('dave-new')).requests[0]?.message?.id).toBe(id);
    expect(await counted('pushes', 'gone')).toBeGreaterThan(0);
  });

  it('a push service that answers 500 is tried again with backoff, for that subscription only', async () => {
    const ivan = await connect('ivan');
    const steady = await browser('ivan-steady');
    const flaky = await browser('ivan-flaky', 'ok', 1);
    await emit(ivan, 'push-subscribe', { subscription: steady });
    await emit(ivan, 'push-subscribe', { subscription: flaky });
    const id = await send('ivan', { escalateAfterMs: 1000 });
    expect(await escalation(id, 'pushed')).toMatchObject({ sent: 2, failed: 0 });
    expect((await control('ivan-flaky')).requests.map((pushed) => pushed.status)).toEqual([500, 201]);
    // The retry went only where the first attempt had failed.
    expect((await control('ivan-steady')).requests.map((pushed) => pushed.status)).toEqual([201]);
    expect((await control('ivan-flaky')).requests[1]?.message?.id).toBe(id);
    expect(await counted('pushes', 'retry')).toBeGreaterThan(0);
  });

  it('a user with no subscription: skipped, said so', async () => {
    const id = await send('frank', { escalateAfterMs: 1000 });
    expect(await escalation(id, 'skipped')).toMatchObject({ reason: 'no-subscriptions' });
    expect(await counted('escalations', 'skipped')).toBeGreaterThan(0);
  });

  it('refuses bad subscriptions, http and private endpoints, bad escalateAfterMs; a user reaches only their own', async () => {
    const erin = await connect('erin');
    const refused = async (body: unknown, code: string) =>
      expect(await emit(erin, 'push-subscribe', body)).toMatchObject({ ok: false, code });
    await refused(undefined, ErrorCode.PUSH_SUBSCRIPTION_INVALID);
    await refused(
      { subscription: { endpoint: 'https://push.example.com/x' } },
      ErrorCode.PUSH_SUBSCRIPTION_INVALID,
    );
    const good = await browser('erin');
    await refused(
      { subscription: { ...good, keys: { ...good.keys, p256dh: 'AAAA' } } },
      ErrorCode.PUSH_SUBSCRIPTION_INVALID,
    );
    await refused(
      { subscription: { ...good, endpoint: good.endpoint.replace('https:', 'http:') } },
      ErrorCode.PUSH_ENDPOINT_REFUSED,
    );
    expect(await emit(erin, 'push-key', undefined)).toEqual({ ok: true, publicKey: vapidPublicKey });

    // escalateAfterMs: a bounded integer, single-user sends only.
    for (const escalateAfterMs of [999, 86_400_001, 1.5, '30000']) {
      const answer = await gatewayCall(trio.gateway.url, API_KEY, 'POST', '/notify', {
        body: { userId: 'erin', payload: {}, escalateAfterMs },
      });
      expect(answer.status).toBe(400);
      expect(answer.body).toMatchObject({ code: ErrorCode.VALIDATION });
      expect(JSON.stringify(answer.body.details)).toContain('escalateAfterMs');
    }
    const topic = await gatewayCall(trio.gateway.url, API_KEY, 'POST', '/notify', {
      body: { topic: 'orders', payload: {}, escalateAfterMs: 5000 },
    });
    expect(topic.status).toBe(400);
    expect(topic.body.error).toContain('escalateAfterMs goes with userId only');

    // Another user (and the same user id in another tenant) cannot remove erin's subscription or cancel
    // her escalation: everything acts on the token's own (tenant, user).
    await emit(erin, 'push-subscribe', { subscription: good });
    const mallory = await connect('mallory');
    const otherErin = await connect('erin', { tenantId: 'acme' });
    expect(await emit(mallory, 'push-unsubscribe', { endpoint: good.endpoint })).toEqual({
      ok: true,
      subscriptions: 0,
    });
    expect(await emit(otherErin, 'push-unsubscribe', { endpoint: good.endpoint })).toMatchObject({
      ok: true,
    });
    expect(await store.list('default', 'erin')).toEqual([good]);
    const id = await send('erin', { escalateAfterMs: 60_000 });
    await waitFor(() => erin.received.some((event) => event.id === id), { what: 'erin got it' });
    expect(await mallory.command('ack', { ids: [id] })).toMatchObject({ ok: true, changed: 0 });
    expect(await otherErin.command('ack', { ids: [id] })).toMatchObject({ ok: true, changed: 0 });
    const marker = inbox.keys('erin').marker(id);
    expect((await new EscalationRecords(redis).facts(marker)).escalation?.state).toBe('scheduled');
    expect(await escalations.getJob(id)).toBeDefined();
    expect(await emit(erin, 'push-unsubscribe', { endpoint: good.endpoint })).toEqual({
      ok: true,
      subscriptions: 0,
    });
  });

  it('without VAPID keys: escalateAfterMs is a 422 naming what to set; push-key and push-subscribe say push is off', async () => {
    const off = {
      ...env,
      HERALD_VAPID_PUBLIC_KEY: '',
      HERALD_VAPID_PRIVATE_KEY: '',
      HERALD_VAPID_SUBJECT: '',
      HERALD_DEPLOYMENT: `${env.HERALD_DEPLOYMENT}-off`,
    };
    const { gateway: plain, realtime: plainRealtime } = await startApps(
      off,
      { gateway: 'gateway', realtime: 'realtime' },
      processes,
    );
    const answer = await gatewayCall(plain.url, API_KEY, 'POST', '/notify', {
      body: { userId: 'grace', payload: {}, escalateAfterMs: 5000 },
    });
    expect(answer.status).toBe(422);
    expect(answer.body).toMatchObject({ code: ErrorCode.PUSH_NOT_CONFIGURED });
    expect(answer.body.error).toContain('HERALD_VAPID_PUBLIC_KEY');
    const batch = await gatewayCall(plain.url, API_KEY, 'POST', '/notify/batch', {
      body: {
        notifications: [
          { userId: 'grace', payload: {}, escalateAfterMs: 5000 },
          { userId: 'grace', payload: {} },
        ],
      },
    });
    expect(batch.status).toBe(202);
    expect(batch.body).toMatchObject({ accepted: 1, rejected: 1 });
    expect((batch.body.results as { code?: string }[])[0]?.code).toBe(ErrorCode.PUSH_NOT_CONFIGURED);
    const grace = new TestClient('grace');
    clients.push(grace);
    await grace.connect(plainRealtime.url);
    const socket = grace.socket;
    if (!socket) throw new Error('not connected');
    expect(await socket.timeout(20_000).emitWithAck('push-key')).toMatchObject({
      ok: false,
      code: ErrorCode.PUSH_NOT_CONFIGURED,
    });
    expect(
      await socket.timeout(20_000).emitWithAck('push-subscribe', { subscription: await browser('grace') }),
    ).toMatchObject({ ok: false, code: ErrorCode.PUSH_NOT_CONFIGURED });
  });

  it('refuses private addresses by default (HERALD_PUSH_ALLOW_PRIVATE unset)', async () => {
    const strict = await startApp({
      name: 'realtime-strict',
      entry: entries.realtime,
      env: { ...env, HERALD_PUSH_ALLOW_PRIVATE: '', HERALD_DEPLOYMENT: `${env.HERALD_DEPLOYMENT}-strict` },
      into: processes,
    });
    const henry = new TestClient('henry');
    clients.push(henry);
    await henry.connect(strict.url);
    const reply = await henry.socket?.timeout(20_000).emitWithAck('push-subscribe', {
      subscription: await browser('henry'),
    });
    expect(reply).toMatchObject({ ok: false, code: ErrorCode.PUSH_ENDPOINT_REFUSED });
    expect(reply.error).toContain('HERALD_PUSH_ALLOW_PRIVATE');
  });
});
