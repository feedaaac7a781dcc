import { randomId, startRedisServer, waitFor } from '@herald/testing';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { IdempotencyStore } from '../src/idempotency.js';
import { auth, buildTestApp, disposeTestApp, gatewayOnOwnRedis } from './helpers.js';

describe('Idempotency-Key across a Redis stall', () => {
  const own = gatewayOnOwnRedis({ HERALD_RATE_LIMIT_BURST: '1000' });

  const send = (key: string) =>
    own.app.inject({
      method: 'POST',
      url: '/notify',
      headers: { ...auth, 'idempotency-key': key },
      payload: { userId: 'stall', payload: { n: 1 } },
    });

  it('after a 503 during a 5 s freeze, the retry with the same key is accepted as soon as Redis is back, once', async () => {
    expect((await send(randomId('warm'))).statusCode).toBe(202);
    const key = randomId('idem');
    own.redis.process.kill('SIGSTOP');
    const frozenAt = Date.now();
    const during: { status: number; body: Record<string, unknown> }[] = [];
    try {
      while (Date.now() - frozenAt < 5000) {
        const response = await send(key);
        during.push({ status: response.statusCode, body: response.json() });
      }
    } finally {
      own.redis.process.kill('SIGCONT');
    }
    expect(during.length).toBeGreaterThan(0);
    for (const answer of during) {
      expect(answer.status).toBe(503);
      expect(answer.body).toMatchObject({ code: 'HERALD_ERR_UNAVAILABLE' });
    }
    // Redis is back: within a few seconds (not the 30 s an orphaned in-flight claim lived), the retry
    // with the same key is accepted; a 409 on the way says "still being processed", never a 5xx.
    const seen: number[] = [];
    const accepted = await waitFor(
      async () => {
        const response = await send(key);
        seen.push(response.statusCode);
        return response.statusCode === 202 ? response.json<{ id: string }>() : undefined;
      },
      { timeoutMs: 5000, intervalMs: 100, what: 'a 202 for the retried key' },
    ).catch((error: Error) => {
      throw new Error(`${error.message}; answers: ${seen.join(',')}`);
    });
    expect(seen.every((status) => [202, 409, 503].includes(status))).toBe(true);
    // Once: one job, and a later retry replays the same answer.
    expect(await own.app.queue.getJob(accepted.id)).toBeDefined();
    const replay = await send(key);
    expect(replay.statusCode).toBe(202);
    expect(replay.json()).toEqual(accepted);
    const jobs = await own.app.queue.getJobs(['waiting', 'prioritized', 'delayed', 'completed']);
    expect(jobs.filter((job) => job.data.userId === 'stall' && job.id === accepted.id)).toHaveLength(1);
    expect(jobs.filter((job) => job.data.userId === 'stall')).toHaveLength(2);
  });
});

describe('an enqueue Redis does not confirm in time', () => {
  const own = gatewayOnOwnRedis({ HERALD_RATE_LIMIT_FAILURE: 'open' });

  it('is a 503 that says the notification may have been accepted, because it may', async () => {
    const userId = randomId('unsure');
    const { Redis } = await import('ioredis');
    const admin = new Redis(own.redis.url);
    try {
      // Writes wait 2 s (longer than the gateway's 800 ms Redis timeout); the add runs afterwards.
      await admin.call('CLIENT', 'PAUSE', '2000', 'WRITE');
      const response = await own.app.inject({
        method: 'POST',
        url: '/notify',
        headers: auth,
        payload: { userId, payload: {} },
      });
      expect(response.statusCode).toBe(503);
      expect(response.json()).toMatchObject({ code: 'HERALD_ERR_UNAVAILABLE', maybeAccepted: true });
      expect(response.json<{ error: string }>().error).toMatch(/may or may not have been accepted/);
      // And indeed: once Redis takes writes again, the job is there.
      await waitFor(
        async () =>
          (await own.app.queue.getJobs(['prioritized', 'waiting'])).some((job) => job.data.userId === userId),
        { timeoutMs: 10_000, what: 'the job the 503 could not confirm' },
      );
    } finally {
      admin.disconnect();
    }
  });
});

describe('a claim whose release failed (Redis away)', () => {
  it('is released as soon as Redis answers again, not when its in-flight time runs out', async () => {
    const server = await startRedisServer({ args: ['--appendonly', 'yes', '--appendfsync', 'always'] });
    const redis = new Redis(server.url, {
      maxRetriesPerRequest: 1,
      enableOfflineQueue: false,
      retryStrategy: () => 50,
    });
    redis.on('error', () => {});
    await new Promise((resolve) => redis.once('ready', resolve));
    // A minute in flight: only the retried release can free the key within the wait below.
    const store = new IdempotencyStore({
      redis,
      keyPrefix: `${randomId('p')}:`,
      ttlSeconds: 60,
      inFlightMs: 60_000,
    });
    try {
      const fingerprint = IdempotencyStore.fingerprint({ n: 1 });
      expect(await store.begin('scope', 'key', fingerprint, 'owner-1')).toMatchObject({ state: 'new' });
      await server.stop();
      await expect(store.abandon('scope', 'key', 'owner-1')).rejects.toThrow();
      await server.restart();
      // The claim survived the restart (append-only file); the release, sent again, frees it.
      await waitFor(
        async () =>
          (await store.begin('scope', 'key', fingerprint, 'owner-2').catch(() => undefined))?.state === 'new',
        {
          timeoutMs: 10_000,
          intervalMs: 200,
          what: 'the key free again',
        },
      );
    } finally {
      redis.disconnect();
      await server.dispose();
    }
  });
});

describe('a request its client gave up on (timed out, connection closed)', () => {
  it('releases its Idempotency-Key when it ends unaccepted, though no answer reached the client', async () => {
    // A replica that takes the replication stream but never answers WAIT (frozen): every accepted
    // request waits out the gateway's 2 s Redis timeout in WAIT, then ends 503, long after its client left.
    const primary = await startRedisServer();
    const replica = await startRedisServer({
      args: ['--replicaof', '127.0.0.1', primary.url.split(':')[2] ?? ''],
    });
    const probe = new Redis(primary.url);
    await waitFor(async () => /connected_slaves:1/.test(await probe.info('replication')), {
      what: 'the replica attached',
    });
    replica.process.kill('SIGSTOP');
    const app = await buildTestApp({
      REDIS_URL: primary.url,
      HERALD_REDIS_WAIT_REPLICAS: '1',
      HERALD_REDIS_TIMEOUT_MS: '2000',
      // A minute in flight: only a release at the request's end frees the key within the wait below.
      HERALD_IDEMPOTENCY_IN_FLIGHT_MS: '60000',
    });
    try {
      const base = await app.listen({ port: 0, host: '127.0.0.1' });
      const key = randomId('gave-up');
      const send = (timeoutMs: number) =>
        fetch(`${base}/notify`, {
          method: 'POST',
          headers: { ...auth, 'content-type': 'application/json', 'idempotency-key': key },
          body: JSON.stringify({ userId: 'gave-up', payload: { n: 1 } }),
          signal: AbortSignal.timeout(timeoutMs),
        });
      await expect(send(200)).rejects.toThrow();
      // The first request is still waiting for its replica: its key is in flight, as it should be.
      expect((await send(5000)).status).toBe(409);
      replica.process.kill('SIGCONT');
      // It ends (503) 2 s after it began; its claim goes with it, and the retry is accepted.
      const seen: number[] = [];
      await waitFor(
        async () => {
          const response = await send(5000);
          seen.push(response.status);
          return response.status === 202;
        },
        { timeoutMs: 10_000, intervalMs: 200, what: 'a 202 for the key of the request its client left' },
      ).catch((error: Error) => {
        throw new Error(`${error.message}; answers: ${seen.join(',')}`);
      });
      const jobs = await app.queue.getJobs(['waiting', 'prioritized', 'delayed']);
      expect(jobs.filter((job) => job.data.userId === 'gave-up')).toHaveLength(1);
    } finally {
      replica.process.kill('SIGCONT');
      probe.disconnect();
      await disposeTestApp(app).catch(() => {});
      await replica.dispose();
      await primary.dispose();
    }
  });
});
