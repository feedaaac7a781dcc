import { fileURLToPath } from 'node:url';
import { NOTIFY_JOB_NAME, notificationJobOptions, type WebhookPayload } from '@herald/protocol';
import { type AppProcess, redisUrl, startApp } from '@herald/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_KEY, gatewayCall, notificationJob, randomId, Stack, waitFor } from './support/stack.js';

const RECEIVER = fileURLToPath(new URL('./support/webhook-receiver.mjs', import.meta.url));

/**
 * Delivery webhooks from a worker whose clock is 6 minutes behind and a realtime server 45 s behind
 * (`faketime`), to a receiver on the right time that verifies as the README says (Standard Webhooks: a
 * `webhook-timestamp` more than 5 minutes from its clock is refused). Herald's times are Redis's clock.
 */
describe('a worker and a realtime server whose clocks are behind (faketime): webhooks and sentAt on time', () => {
  const stack = new Stack(redisUrl(), { HERALD_WEBHOOK_ALLOW_PRIVATE: 'true' });
  let gateway: AppProcess;
  let realtime: AppProcess;
  let receiver: AppProcess;
  let worker: AppProcess;
  const skewed = (name: string, kind: 'worker' | 'realtime', skew: string) =>
    stack.startSkewed(kind, name, skew);

  beforeAll(async () => {
    [gateway, realtime, receiver, worker] = await Promise.all([
      stack.start('gateway', 'gateway'),
      skewed('rt-behind', 'realtime', '-45s'),
      startApp({ name: 'receiver', entry: RECEIVER, env: {}, into: stack.processes }),
      skewed('worker-behind', 'worker', '-360s'),
    ]);
  });
  afterAll(() => stack.dispose());

  it('every request passes the 5-minute window; read is not before delivered, failed not before sent', async () => {
    const hook = randomId('hook');
    const put = await gatewayCall(gateway.url, API_KEY, 'PUT', '/webhook', {
      body: { url: `${receiver.url}/hook/${hook}` },
    });
    expect(put.status, JSON.stringify(put.body)).toBe(201);
    const control = await fetch(`${receiver.url}/control/${hook}`, {
      method: 'POST',
      body: JSON.stringify({ secret: put.body.secret }),
    });
    expect(control.status).toBe(200);
    const user = randomId('alice');
    const client = stack.client(user);
    await client.connect(realtime.url);
    const sent = await gatewayCall(gateway.url, API_KEY, 'POST', '/notify', {
      body: { userId: user, payload: {} },
    });
    const id = sent.body.id as string;
    await waitFor(() => client.received.some((event) => event.id === id), { what: 'shown' });
    expect(await client.command('ack', { ids: [id] })).toMatchObject({ changed: 1 });
    expect(await client.command('read', { ids: [id] })).toMatchObject({ changed: 1 });
    // Failed for good: a job the worker can never store (an empty user id) fails without retries.
    const broken = notificationJob('', {});
    await stack.queue.add(NOTIFY_JOB_NAME, broken, notificationJobOptions(broken));

    type Request = { status: number; error?: string; payload: WebhookPayload };
    const requests = await waitFor(
      async () => {
        const answer = (await (await fetch(`${receiver.url}/control/${hook}`)).json()) as {
          requests: Request[];
        };
        const types = new Set<string>(answer.requests.map((request) => request.payload.type));
        return ['delivered', 'read', 'failed'].every((type) => types.has(`notification.${type}`))
          ? answer.requests
          : undefined;
      },
      { what: 'delivered, read and failed at the receiver', timeoutMs: 20_000 },
    );
    // The receiver's first answer to each: accepted (204), not refused for its timestamp.
    for (const request of requests) expect(request, JSON.stringify(request)).toMatchObject({ status: 204 });
    const at = (type: string) =>
      Date.parse(requests.find((request) => request.payload.type === type)?.payload.data.at ?? '');
    expect(at('notification.read')).toBeGreaterThanOrEqual(at('notification.delivered'));
    // Not 6 minutes before it was even sent.
    expect(at('notification.failed')).toBeGreaterThanOrEqual(Date.parse(broken.createdAt));
  });

  it('the worker says its clock is behind Redis’s, by how much, and what that delays', async () => {
    const warnings = () =>
      worker.lines
        .filter((line) => line.includes('behind Redis'))
        .map((line) => JSON.parse(line) as Record<string, unknown>);
    await waitFor(() => warnings().length > 0, { what: 'the warning in the worker’s log' });
    const [warning] = warnings();
    expect(warning).toMatchObject({ level: 40, behindMs: expect.any(Number) });
    // 360 s behind, read from Redis's TIME (within a loopback round trip and a busy machine's start).
    expect(Math.abs((warning?.behindMs as number) - 360_000)).toBeLessThan(5000);
    expect(warning?.msg).toMatch(
      /^This machine's clock is 3[56]\d\.\d s behind Redis's: .*delayMs.*late.*NTP/,
    );
  });

  it('a topic send’s sentAt is not before it was sent', async () => {
    const user = randomId('fan');
    const topic = randomId('news');
    const subscribed = await gatewayCall(gateway.url, API_KEY, 'PUT', `/topics/${topic}/subscribers/${user}`);
    expect(subscribed.status).toBe(200);
    const [seconds] = await stack.redis.time();
    const sent = await gatewayCall(gateway.url, API_KEY, 'POST', '/notify', { body: { topic, payload: {} } });
    expect(sent.status).toBe(202);
    const status = await waitFor(
      async () => {
        const answer = await gatewayCall(gateway.url, API_KEY, 'GET', `/notifications/${sent.body.id}`);
        return answer.body.status === 'sent' ? answer.body : undefined;
      },
      { what: 'the topic send sent' },
    );
    // By Redis's clock, not the worker's (6 minutes behind).
    expect(Date.parse(status.sentAt as string)).toBeGreaterThanOrEqual(Number(seconds) * 1000);
  });
});
