import { createECDH } from 'node:crypto';
import { fanoutQueueName } from '@herald/protocol';
import { type AppProcess, queueConnection, redisUrl } from '@herald/testing';
import { Queue } from 'bullmq';
import { io } from 'socket.io-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_KEY, gatewayCall, randomId, Stack, waitFor } from './support/stack.js';

/**
 * A gateway whose wall clock is 45 s behind Redis's (and the worker's): `faketime`, as an operator's
 * machine without NTP. What a notification's times mean (`ttlMs` and `delayMs` count from its
 * acceptance) must not move with it: they are Redis's clock, like the rate limiter's.
 */
describe('a gateway whose clock is 45 s behind (faketime): ttlMs and delayMs keep their meaning', () => {
  const stack = new Stack(redisUrl());
  let gateway: AppProcess;

  beforeAll(async () => {
    [gateway] = await Promise.all([
      stack.startSkewed('gateway', 'gw-behind', '-45s'),
      stack.start('worker', 'worker'),
    ]);
  });
  afterAll(() => stack.dispose());

  async function send(userId: string, extra: Record<string, unknown> = {}): Promise<string> {
    const answer = await gatewayCall(gateway.url, API_KEY, 'POST', '/notify', {
      body: { userId, payload: {}, ...extra },
    });
    expect(answer.status, JSON.stringify(answer.body)).toBe(202);
    return answer.body.id as string;
  }

  async function status(id: string): Promise<Record<string, unknown>> {
    return (await gatewayCall(gateway.url, API_KEY, 'GET', `/notifications/${id}`)).body;
  }

  it('a 30 s ttlMs is stored, not expired on arrival; its createdAt is Redis’s now', async () => {
    const user = randomId('ttl');
    const [seconds] = await stack.redis.time();
    const id = await send(user, { ttlMs: 30_000 });
    await waitFor(
      async () => (await status(id)).status !== 'queued' || (await stack.inboxIds(user)).length > 0,
      {
        what: 'the worker took it',
      },
    );
    expect((await status(id)).status).toBe('queued');
    expect(await stack.inboxIds(user)).toEqual([id]);
    // Within a few seconds of Redis's clock, not 45 s before it.
    const createdAt = Date.parse((await status(id)).createdAt as string);
    expect(Math.abs(createdAt - Number(seconds) * 1000)).toBeLessThan(10_000);
  });

  it('a 20 s delayMs is not due at once: a notification sent after it is stored first', async () => {
    const user = randomId('delay');
    const delayed = await send(user, { delayMs: 20_000 });
    const next = await send(user);
    await waitFor(async () => (await stack.inboxIds(user)).includes(next), {
      what: 'the undelayed one stored',
    });
    expect(await stack.queueOf(user).getJobState(delayed)).toBe('delayed');
    expect(await stack.inboxIds(user)).toEqual([next]);
    // Not left to fire after the test.
    expect((await gatewayCall(gateway.url, API_KEY, 'DELETE', `/notifications/${delayed}`)).status).toBe(200);
  });
});

/**
 * A worker whose wall clock is 30 s ahead of Redis's: BullMQ hands a delayed job over when the worker's
 * `Date.now()` reaches its due time, so without a look at Redis's clock it ran every delay 30 s early.
 */
describe('a worker whose clock is 30 s ahead (faketime): delayMs is not early', () => {
  const vapid = createECDH('prime256v1');
  vapid.generateKeys();
  // Web Push on (escalations), with a real key pair.
  const stack = new Stack(redisUrl(), {
    HERALD_VAPID_PUBLIC_KEY: vapid.getPublicKey('base64url'),
    HERALD_VAPID_PRIVATE_KEY: vapid.getPrivateKey('base64url'),
    HERALD_VAPID_SUBJECT: 'mailto:ops@example.com',
  });
  let gateway: AppProcess;
  let worker: AppProcess;

  beforeAll(async () => {
    [gateway, worker] = await Promise.all([
      stack.start('gateway', 'gateway'),
      stack.startSkewed('worker', 'worker-ahead', '+30s'),
    ]);
  });
  afterAll(() => stack.dispose());

  it('a worker ahead of Redis does not warn about its clock (it holds early jobs until their time)', () => {
    // It checked at start, before it logged `listening`.
    expect(worker.lines.filter((line) => line.includes('behind Redis'))).toEqual([]);
  });

  it('a 20 s delayMs waits: a notification sent after it is stored first, and cancelling it still works', async () => {
    const user = randomId('delay');
    const send = async (extra: Record<string, unknown> = {}) => {
      const answer = await gatewayCall(gateway.url, API_KEY, 'POST', '/notify', {
        body: { userId: user, payload: {}, ...extra },
      });
      expect(answer.status, JSON.stringify(answer.body)).toBe(202);
      return answer.body.id as string;
    };
    const delayed = await send({ delayMs: 20_000 });
    const next = await send();
    await waitFor(async () => (await stack.inboxIds(user)).includes(next), {
      what: 'the undelayed one stored',
    });
    // Handed over early, then put back for the rest of its delay (by Redis's clock): not stored.
    await waitFor(async () => (await stack.queueOf(user).getJobState(delayed)) === 'delayed', {
      what: 'the delayed one waiting',
    });
    expect(await stack.inboxIds(user)).toEqual([next]);
    expect((await gatewayCall(gateway.url, API_KEY, 'DELETE', `/notifications/${delayed}`)).status).toBe(200);
  });

  it('a 20 s escalateAfterMs: its dueAt is on Redis’s clock, and it waits for it', async () => {
    const user = randomId('escalate');
    const [seconds] = await stack.redis.time();
    const answer = await gatewayCall(gateway.url, API_KEY, 'POST', '/notify', {
      body: { userId: user, payload: {}, escalateAfterMs: 20_000 },
    });
    expect(answer.status, JSON.stringify(answer.body)).toBe(202);
    const id = answer.body.id as string;
    const escalation = await waitFor(
      async () => {
        const status = await gatewayCall(gateway.url, API_KEY, 'GET', `/notifications/${id}`);
        return status.body.escalation as { state: string; dueAt?: string } | undefined;
      },
      { what: 'the escalation scheduled' },
    );
    expect(escalation.state).toBe('scheduled');
    // 20 s after Redis's now, not 20 s after the worker's (30 s ahead).
    expect(Math.abs(Date.parse(escalation.dueAt ?? '') - (Number(seconds) * 1000 + 20_000))).toBeLessThan(
      10_000,
    );
    const escalations = new Queue(`${stack.env.HERALD_QUEUE_NAME}-escalate`, {
      prefix: '{herald}',
      connection: queueConnection(),
    });
    try {
      await waitFor(async () => (await escalations.getJobState(id)) === 'delayed', {
        what: 'the escalation waiting',
      });
      await (await escalations.getJob(id))?.remove();
    } finally {
      await escalations.close();
    }
  });

  it('a topic send with a 20 s delayMs waits too', async () => {
    const user = randomId('fan');
    const topic = randomId('news');
    const subscribed = await gatewayCall(gateway.url, API_KEY, 'PUT', `/topics/${topic}/subscribers/${user}`);
    expect(subscribed.status).toBe(200);
    const send = async (extra: Record<string, unknown>) => {
      const answer = await gatewayCall(gateway.url, API_KEY, 'POST', '/notify', {
        body: { payload: {}, ...extra },
      });
      expect(answer.status, JSON.stringify(answer.body)).toBe(202);
      return answer.body.id as string;
    };
    const delayed = await send({ topic, delayMs: 20_000 });
    const next = await send({ userId: user });
    await waitFor(async () => (await stack.inboxIds(user)).includes(next), {
      what: 'the undelayed one stored',
    });
    const fanouts = new Queue(fanoutQueueName(stack.env.HERALD_QUEUE_NAME ?? ''), {
      prefix: '{herald}',
      connection: queueConnection(),
    });
    try {
      await waitFor(async () => (await fanouts.getJobState(delayed)) === 'delayed', {
        what: 'the topic send waiting',
      });
      expect(await stack.inboxIds(user)).toEqual([next]);
      await (await fanouts.getJob(delayed))?.remove();
    } finally {
      await fanouts.close();
    }
  });
});

/**
 * A realtime server whose wall clock is 45 s ahead of Redis's (and of the gateway that mints tokens): a
 * token's `exp` is the gateway's, so both must read one clock, or a token lives 45 s less (and one of 30 s
 * is refused as expired the moment it is minted).
 */
describe('a realtime server whose clock is 45 s ahead (faketime): a fresh token is good', () => {
  const stack = new Stack(redisUrl(), { HERALD_TOKEN_TTL_SECONDS: '30' });
  let gateway: AppProcess;
  let realtime: AppProcess;

  beforeAll(async () => {
    [gateway, realtime] = await Promise.all([
      stack.start('gateway', 'gateway'),
      stack.startSkewed('realtime', 'rt-ahead', '+45s'),
    ]);
  });
  afterAll(() => stack.dispose());

  it('a 30 s token from POST /tokens connects', async () => {
    const minted = await gatewayCall(gateway.url, API_KEY, 'POST', '/tokens', {
      body: { userId: randomId('alice') },
    });
    expect(minted.status).toBe(200);
    const socket = io(realtime.url, {
      auth: { token: minted.body.token },
      transports: ['websocket'],
      reconnection: false,
      forceNew: true,
    });
    try {
      const outcome = await new Promise<string>((resolve) => {
        socket.once('connect', () => resolve('connected'));
        socket.once('connect_error', (error: Error & { data?: { code?: string } }) =>
          resolve(error.data?.code ?? error.message),
        );
      });
      expect(outcome).toBe('connected');
    } finally {
      socket.disconnect();
    }
  });
});
