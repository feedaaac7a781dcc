import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { WebhookJob } from '@herald/protocol';
import { randomId, testRedis, waitFor } from '@herald/testing';
import type { Cluster, Redis } from 'ioredis';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type DeliverySettings,
  deliverWebhook,
  guardedLookup,
  PrivateAddressError,
  WebhookStore,
} from '../src/index.js';

const settings: DeliverySettings = {
  attempts: 3,
  backoffMs: 10,
  timeoutMs: 1000,
  parkAfter: 2,
  allowPrivate: true,
};

// A real HTTP endpoint on loopback: answers what `status` says, records what it got.
let server: Server;
let base: string;
let status = 204;
const got: { headers: IncomingHttpHeaders; body: string }[] = [];
let redis: Redis | Cluster;

beforeAll(async () => {
  redis = testRedis();
  server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => {
      body += chunk.toString();
    });
    request.on('end', () => {
      got.push({ headers: request.headers, body });
      response.writeHead(status).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
});
afterAll(async () => {
  server.close();
  redis.disconnect();
});

function setup() {
  const prefix = `${randomId('wh')}:`;
  const store = new WebhookStore(redis, prefix);
  const tenantId = randomId('tenant');
  const job = (n: number): WebhookJob => ({
    id: `msg_${n}`,
    tenantId,
    payload: {
      type: 'notification.read',
      timestamp: new Date().toISOString(),
      data: { notificationId: `n-${n}`, userId: 'alice', at: new Date().toISOString() },
    },
  });
  return { store, tenantId, job };
}

describe('one delivery attempt (real Redis, real HTTP)', () => {
  it('a message of a webhook deleted since is dropped, not sent to a webhook created after it (before: its events went to the new URL, signed with the new secret)', async () => {
    const { store, tenantId, job } = setup();
    await store.set(tenantId, { url: `${base}/old` });
    const produced = { ...job(1), webhook: (await store.record(tenantId))?.createdAt as string };
    await store.delete(tenantId);
    const deletedAt = Date.now();
    await waitFor(() => Date.now() > deletedAt, { what: 'another millisecond' });
    await store.set(tenantId, { url: `${base}/new` });
    status = 204;
    const before = got.length;
    expect(await deliverWebhook(produced, store, settings)).toEqual({ outcome: 'no-webhook' });
    expect(got.length).toBe(before);
    // The new webhook's own messages go out; so does one from before this field existed.
    const current = { ...job(2), webhook: (await store.record(tenantId))?.createdAt as string };
    expect(await deliverWebhook(current, store, settings)).toEqual({ outcome: 'delivered', status: 204 });
    expect(await deliverWebhook(job(3), store, settings)).toEqual({ outcome: 'delivered', status: 204 });
  });

  it('POSTs the event signed; a 2xx is delivered and resets the failures', async () => {
    const { store, tenantId, job } = setup();
    const { webhook } = await store.set(tenantId, { url: `${base}/hook` });
    const secret = (webhook as { secret: string }).secret;
    status = 204;
    const before = got.length;
    expect(await deliverWebhook(job(1), store, settings)).toEqual({ outcome: 'delivered', status: 204 });
    const request = got[before];
    expect(request?.headers['content-type']).toBe('application/json');
    expect(
      new Webhook(secret).verify(request?.body ?? '', request?.headers as Record<string, string>),
    ).toMatchObject({
      type: 'notification.read',
      data: { notificationId: 'n-1' },
    });
    expect(await store.get(tenantId)).toMatchObject({
      consecutiveFailures: 0,
      lastSuccessAt: expect.any(String),
    });
  });

  it('a 500 retries with backoff; the last attempt fails for good', async () => {
    const { store, tenantId, job } = setup();
    await store.set(tenantId, { url: `${base}/hook` });
    status = 500;
    const first = await deliverWebhook(job(1), store, { ...settings, parkAfter: 100 });
    expect(first).toMatchObject({ outcome: 'retry', error: 'HTTP 500' });
    expect(
      await deliverWebhook({ ...job(1), attempts: 2 }, store, { ...settings, parkAfter: 100 }),
    ).toMatchObject({
      outcome: 'failed',
      error: '3 attempts: HTTP 500',
    });
  });

  it('parks after parkAfter failures in a row, holds messages, and resume hands them back', async () => {
    const { store, tenantId, job } = setup();
    await store.set(tenantId, { url: `${base}/hook` });
    status = 503;
    expect((await deliverWebhook(job(1), store, settings)).outcome).toBe('retry');
    expect((await deliverWebhook(job(2), store, settings)).outcome).toBe('held');
    const before = got.length;
    expect((await deliverWebhook(job(3), store, settings)).outcome).toBe('held');
    expect(got.length).toBe(before);
    expect(await store.get(tenantId)).toMatchObject({ state: 'parked', held: 2, consecutiveFailures: 2 });
    let handed: WebhookJob[] = [];
    const resumed = await store.resume(tenantId, async (held) => {
      handed = held;
      return held.length;
    });
    expect(resumed).toMatchObject({ outcome: 'resumed', resent: 2 });
    expect(handed.map((held) => [held.id, held.attempts])).toEqual([
      ['msg_2', 1],
      ['msg_3', undefined],
    ]);
    expect(await store.get(tenantId)).toMatchObject({ state: 'active', held: 0, consecutiveFailures: 0 });
    expect((await store.resume(tenantId, async () => 0)).outcome).toBe('not-parked');
  });

  it('drops a message whose webhook is gone or no longer takes its event', async () => {
    const { store, tenantId, job } = setup();
    expect(await deliverWebhook(job(1), store, settings)).toEqual({ outcome: 'no-webhook' });
    await store.set(tenantId, { url: `${base}/hook`, events: ['notification.failed'] });
    expect(await deliverWebhook(job(1), store, settings)).toEqual({ outcome: 'not-subscribed' });
  });

  it('without allowPrivate, a loopback URL stored anyway is refused at delivery, and so is a name that resolves inward', async () => {
    const { store, tenantId, job } = setup();
    await store.set(tenantId, { url: `${base}/hook` });
    const before = got.length;
    const outcome = await deliverWebhook(job(1), store, { ...settings, allowPrivate: false, parkAfter: 100 });
    expect(outcome).toMatchObject({
      outcome: 'retry',
      error: expect.stringContaining('loopback or private'),
    });
    expect(got.length).toBe(before);
    const error = await new Promise<Error | null>((resolve) =>
      guardedLookup('localhost', {}, (e) => resolve(e)),
    );
    expect(error).toBeInstanceOf(PrivateAddressError);
  });

  it('without allowPrivate, an IPv6 form of a loopback IPv4 stored anyway (NAT64, IPv4-compatible, 6to4) is refused at delivery', async () => {
    for (const url of [
      'http://[64:ff9b::7f00:1]:47110/hook',
      'http://[::127.0.0.1]:47110/',
      'http://[2002:7f00:1::]/',
    ]) {
      const { store, tenantId, job } = setup();
      await store.set(tenantId, { url });
      const outcome = await deliverWebhook(job(1), store, {
        ...settings,
        allowPrivate: false,
        parkAfter: 100,
      });
      expect(outcome, url).toMatchObject({
        outcome: 'retry',
        error: expect.stringContaining('loopback or private'),
      });
    }
  });

  it('a rotated secret signs beside the previous one', async () => {
    const { store, tenantId, job } = setup();
    const { webhook } = await store.set(tenantId, { url: `${base}/hook` });
    const previous = (webhook as { secret: string }).secret;
    const rotated = await store.rotate(tenantId);
    status = 200;
    const before = got.length;
    await deliverWebhook(job(1), store, settings);
    const request = got[before];
    const headers = request?.headers as Record<string, string>;
    expect(headers['webhook-signature']?.split(' ')).toHaveLength(2);
    for (const secret of [previous, rotated?.secret ?? '']) {
      expect(() => new Webhook(secret).verify(request?.body ?? '', headers)).not.toThrow();
    }
  });
});
