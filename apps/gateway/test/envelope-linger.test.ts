import { randomUUID } from 'node:crypto';
import { NOTIFY_ENVELOPE_JOB_NAME, type NotificationEnvelope } from '@herald/protocol';
import { batchScriptSource, scriptSource } from '@herald/rate-limiter';
import { monitorRedis, waitFor } from '@herald/testing';
import type { Job } from 'bullmq';
import calculateSlot from 'cluster-key-slot';
import type { Cluster, Redis } from 'ioredis';
import { beforeAll, describe, expect, it } from 'vitest';
import { API_KEY, auth, everyPartition, testAppForFile } from './helpers.js';
import { open, parseAnswer } from './raw-http.js';

// A long window (the longest the Redis timeout allows), so that what sends an envelope early shows.
const app = await testAppForFile({
  HERALD_ENVELOPE_WINDOW_MS: '1000',
  HERALD_REDIS_TIMEOUT_MS: '4000',
  HERALD_RATE_LIMIT_BURST: '1000',
  HERALD_SENDER_RATE_LIMIT_BURST: '1000',
});
/** A new user id on `userId`'s queue partition (an envelope carries one partition's notifications). */
function samePartition(userId: string, name: string): string {
  for (;;) {
    const candidate = `${name}-${randomUUID()}`;
    if (app.partitionOf('default', candidate) === app.partitionOf('default', userId)) return candidate;
  }
}

/** The limiter decisions gather with the envelopes (see Gathering), on one server as on a Cluster. */
const gathered = app.notifications.gathering !== undefined;
let port: number;
beforeAll(async () => {
  await app.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.address();
  port = typeof address === 'object' && address ? address.port : 0;
});

/** herald_envelopes_total by reason, from /metrics. */
async function flushes(): Promise<Record<string, number>> {
  const text = (await app.inject({ method: 'GET', url: '/metrics' })).body;
  const counts: Record<string, number> = {};
  for (const match of text.matchAll(/^herald_envelopes_total\{reason="(\w+)"\} (\d+)/gm))
    counts[match[1] ?? ''] = Number(match[2]);
  return counts;
}

/** Recipient decisions allowed so far. */
async function allowed(): Promise<number> {
  const text = (await app.inject({ method: 'GET', url: '/metrics' })).body;
  return Number(
    /herald_ratelimit_decisions_total\{policy="recipient",outcome="allowed"\} (\d+)/.exec(text)?.[1] ?? 0,
  );
}

/** Requests held waiting for their gathering (their limiter decision, then their envelope). */
async function waiting(): Promise<number> {
  const text = (await app.inject({ method: 'GET', url: '/metrics' })).body;
  return Number(/^herald_envelope_waiting_requests (\d+)/m.exec(text)?.[1] ?? Number.NaN);
}

async function envelopeHolding(id: string): Promise<Job<NotificationEnvelope> | undefined> {
  const jobs = (await everyPartition(app).getJobs([
    'prioritized',
    'waiting',
  ])) as unknown as Job<NotificationEnvelope>[];
  return jobs.find(
    (job) => job.name === NOTIFY_ENVELOPE_JOB_NAME && job.data.items.some((item) => item.id === id),
  );
}

// In file order: the first test's sender is alone (the most requests held at once so far: one).
describe('envelopes go when no other notification can be on its way', () => {
  it('a sender that waits for each answer is not held for the window: each envelope goes as soon as its request waits (idle), none lingers', async () => {
    for (let i = 0; i < 5; i++) {
      const response = await app.inject({
        method: 'POST',
        url: '/notify',
        headers: auth,
        payload: { userId: `alone-${randomUUID()}`, payload: { i } },
      });
      expect(response.statusCode).toBe(202);
    }
    const counts = await flushes();
    expect(counts.idle).toBe(5);
    expect(counts.linger ?? 0).toBe(0);
  });

  it('a request still on its way (its body not yet sent) holds the envelope: both ride in one', async () => {
    const slowUser = `slow-${randomUUID()}`;
    const slowBody = JSON.stringify({ userId: slowUser, payload: { slow: true } });
    const socket = await open(port);
    const received: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    socket.on('error', () => {});
    // The headers and half the body: the request is in flight, not yet waiting for an envelope. The fast
    // one goes only once the gateway has the slow one (its `request` event has run Fastify's hooks).
    let slowArrived = false;
    const onRequest = (request: { headers: Record<string, unknown> }) => {
      if (request.headers['x-test'] === 'slow') slowArrived = true;
    };
    app.server.on('request', onRequest);
    const half = Math.floor(slowBody.length / 2);
    socket.write(
      `POST /notify HTTP/1.1\r\nHost: x\r\nX-Test: slow\r\nAuthorization: Bearer ${API_KEY}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(slowBody)}\r\n\r\n${slowBody.slice(0, half)}`,
    );
    await waitFor(() => slowArrived, { timeoutMs: 5000, what: 'the gateway to have the slow request' });
    app.server.off('request', onRequest);
    const before = await flushes();
    const allowedBefore = await allowed();
    const fast = app.inject({
      method: 'POST',
      url: '/notify',
      headers: auth,
      payload: { userId: samePartition(slowUser, 'fast'), payload: { fast: true } },
    });
    // The fast one waits (nothing sent yet: the slow one is on its way): on one Redis server before its
    // limiter decision, which gathers too; on a Cluster (a decision per request) in its envelope.
    await waitFor(async () => (await waiting()) === 1, {
      timeoutMs: 5000,
      what: 'the fast request to wait for its gathering',
    });
    if (gathered) {
      expect(await allowed()).toBe(allowedBefore);
    } else {
      await waitFor(async () => (await allowed()) > allowedBefore, {
        timeoutMs: 5000,
        what: 'the fast request to be past its limits',
      });
    }
    expect(await flushes()).toEqual(before);
    socket.write(slowBody.slice(half));
    const fastAnswer = await fast;
    expect(fastAnswer.statusCode).toBe(202);
    await waitFor(() => parseAnswer(Buffer.concat(received).toString()) !== undefined, {
      timeoutMs: 5000,
      what: 'the slow request to be answered',
    });
    socket.destroy();
    const slowAnswer = parseAnswer(Buffer.concat(received).toString());
    expect(slowAnswer?.status).toBe(202);
    const fastId = (fastAnswer.json() as { id: string }).id;
    const slowId = (JSON.parse(slowAnswer?.body ?? '{}') as { id: string }).id;
    const envelope = await envelopeHolding(fastId);
    expect(envelope?.data.items.map((item) => item.id).sort()).toEqual([fastId, slowId].sort());
  });
});

// On a Cluster a tenant's decisions are one call on its master (its buckets share the tenant's tag).
describe('the notifications gather before their limiter decisions', () => {
  /**
   * Sends one request per body at once, each with its API key (headers and the first bytes of every
   * body, then, once the gateway has them all, the rest; or, `whole`, each request in one write, so that
   * each is read and waits before the next arrives); answers each, and the limiter calls Redis ran
   * meanwhile (MONITOR on the server, or on every master of the Cluster).
   */
  async function sendTogether(
    bodies: string[],
    keys: string[],
    whole = false,
  ): Promise<{ answers: ReturnType<typeof parseAnswer>[]; limiterCalls: string[][] }> {
    const nodes = app.redis.isCluster ? (app.redis as Cluster).nodes('master') : [app.redis as Redis];
    const prefix = app.config.rateLimit.keyPrefix;
    // The limiter's scripts on every node first: a first use there would be an EVALSHA answered
    // NOSCRIPT, then an EVAL (two commands for one call).
    const scripts = [
      scriptSource('token-bucket', 1),
      scriptSource('token-bucket'),
      batchScriptSource('token-bucket'),
    ].filter((source) => source !== undefined);
    for (const node of nodes) for (const source of scripts) await node.script('LOAD', source);
    const monitors = await Promise.all(
      nodes.map((node) =>
        monitorRedis({ host: node.options.host ?? '127.0.0.1', port: node.options.port ?? 6379 }),
      ),
    );
    const seen: string[][] = [];
    for (const monitor of monitors) monitor.onCommand((args) => seen.push(args));
    const tag = `together-${randomUUID()}`;
    let arrived = 0;
    const onRequest = (request: { headers: Record<string, unknown> }) => {
      if (request.headers['x-test'] === tag) arrived++;
    };
    app.server.on('request', onRequest);
    const sockets = await Promise.all(bodies.map(() => open(port)));
    const received = sockets.map(() => [] as Buffer[]);
    sockets.forEach((socket, i) => {
      socket.on('data', (chunk: Buffer) => received[i]?.push(chunk));
      socket.on('error', () => {});
      const body = bodies[i] ?? '';
      socket.write(
        `POST /notify HTTP/1.1\r\nHost: x\r\nX-Test: ${tag}\r\nAuthorization: Bearer ${keys[i]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${whole ? body : body.slice(0, 5)}`,
      );
    });
    if (!whole) {
      await waitFor(() => arrived === bodies.length, {
        timeoutMs: 5000,
        what: 'the gateway to have every request',
      });
      sockets.forEach((socket, i) => {
        socket.write((bodies[i] ?? '').slice(5));
      });
    }
    app.server.off('request', onRequest);
    const answers = await waitFor(
      () => {
        const parsed = received.map((chunks) => parseAnswer(Buffer.concat(chunks).toString()));
        return parsed.every((answer) => answer !== undefined) ? parsed : undefined;
      },
      { timeoutMs: 5000, what: 'every answer' },
    );
    for (const socket of sockets) socket.destroy();
    // MONITOR shows commands in the order Redis ran them: once it shows this ECHO, it has shown the rest.
    const marker = `done-${randomUUID()}`;
    await Promise.all(nodes.map((node) => node.echo(marker)));
    await waitFor(() => seen.filter((args) => args[1] === marker).length === nodes.length, {
      timeoutMs: 5000,
      what: 'MONITOR to catch up',
    });
    for (const monitor of monitors) monitor.close();
    const limiterCalls = seen.filter(
      ([command, ...args]) => /^evalsha$/i.test(command ?? '') && args.some((arg) => arg.startsWith(prefix)),
    );
    return { answers, limiterCalls };
  }

  const idsOf = (answers: ReturnType<typeof parseAnswer>[]) =>
    answers.map((answer) => (JSON.parse(answer?.body ?? '{}') as { id: string }).id);

  it.skipIf(!gathered)(
    'sends that arrive together cost Redis one rate-limit call and ride in one envelope',
    async () => {
      const sends = 10;
      const bodies = Array.from({ length: sends }, (_, i) =>
        JSON.stringify({ userId: samePartition('together', `together-${i}`), payload: { i } }),
      );
      const { answers, limiterCalls } = await sendTogether(bodies, Array(sends).fill(API_KEY));
      expect(answers.map((answer) => answer?.status)).toEqual(Array(sends).fill(202));
      expect(limiterCalls).toHaveLength(1);
      const ids = idsOf(answers);
      const envelope = await envelopeHolding(ids[0] ?? '');
      expect(envelope?.data.items.map((item) => item.id).sort()).toEqual([...ids].sort());
    },
  );

  it.skipIf(!gathered)(
    "sends of tenants on different masters ride in one envelope too: it waits for every tenant's decisions",
    async () => {
      // Three tenants whose tags fall in the three default slot ranges (on a Cluster: three masters, three
      // replies at different times), two users each, every user on one queue partition.
      const tenants: string[] = [];
      for (let n = 0; tenants.length < 3; n++) {
        const tenant = `tenant-${randomUUID().slice(0, 8)}-${n}`;
        const range = Math.min(2, Math.floor((calculateSlot(tenant) * 3) / 16_384));
        if (tenants.every((other) => Math.min(2, Math.floor((calculateSlot(other) * 3) / 16_384)) !== range))
          tenants.push(tenant);
      }
      const partition = app.partitionOf('default', 'together');
      const userOf = (tenant: string, i: number): string => {
        for (;;) {
          const candidate = `${tenant}-user-${i}-${randomUUID()}`;
          if (app.partitionOf(tenant, candidate) === partition) return candidate;
        }
      };
      const keyOf = new Map<string, string>();
      for (const tenant of tenants)
        keyOf.set(tenant, (await app.apiKeys.create({ name: tenant, tenantId: tenant })).key);
      const senders = tenants.flatMap((tenant) => [tenant, tenant]);
      const bodies = senders.map((tenant, i) =>
        JSON.stringify({ userId: userOf(tenant, i), payload: { i } }),
      );
      const { answers } = await sendTogether(
        bodies,
        senders.map((tenant) => keyOf.get(tenant) ?? ''),
      );
      expect(answers.map((answer) => answer?.status)).toEqual(Array(senders.length).fill(202));
      const ids = idsOf(answers);
      const envelope = await envelopeHolding(ids[0] ?? '');
      expect(envelope?.data.items.map((item) => item.id).sort()).toEqual([...ids].sort());
    },
  );

  it.skipIf(!gathered)(
    "a pool that keeps its requests in flight is decided in two halves that take turns, each at least an envelope's target; fewer than the target wait for the linger",
    async () => {
      // An envelope's target on every queue partition: a half goes early only once it holds that many.
      const target = app.config.envelopeTargetItems * app.queues.length;
      const bodiesOf = (count: number, name: string) =>
        Array.from({ length: count }, (_, i) =>
          JSON.stringify({ userId: `${name}-${i}-${randomUUID()}`, payload: { i } }),
        );
      // The pool, all in flight at once: the most requests held at once is now 2 × target, and they go
      // together (none is waiting before they all are).
      const pool = await sendTogether(bodiesOf(2 * target, 'pool'), Array(2 * target).fill(API_KEY));
      expect(pool.answers.map((answer) => answer?.status)).toEqual(Array(2 * target).fill(202));

      // Half of it comes back, each request whole, waiting as soon as it is read: as soon as the half is
      // there it goes (the other half would be in Redis by now), not after the linger.
      const before = await flushes();
      const half = await sendTogether(bodiesOf(target, 'half'), Array(target).fill(API_KEY), true);
      expect(half.answers.map((answer) => answer?.status)).toEqual(Array(target).fill(202));
      expect(half.limiterCalls).toHaveLength(1);
      const afterHalf = await flushes();
      expect(afterHalf.idle ?? 0).toBeGreaterThan(before.idle ?? 0);
      expect(afterHalf.linger ?? 0).toBe(before.linger ?? 0);

      // Fewer than the target, right after the pool again (the peak is the pool's): they linger, so that
      // no envelope goes emptier than a linger makes it.
      await sendTogether(bodiesOf(2 * target, 'again'), Array(2 * target).fill(API_KEY));
      const beforeFew = await flushes();
      const few = await sendTogether(bodiesOf(target - 1, 'few'), Array(target - 1).fill(API_KEY), true);
      expect(few.answers.map((answer) => answer?.status)).toEqual(Array(target - 1).fill(202));
      const afterFew = await flushes();
      expect(afterFew.linger ?? 0).toBeGreaterThan(beforeFew.linger ?? 0);
      expect(afterFew.idle ?? 0).toBe(beforeFew.idle ?? 0);
    },
  );
});
