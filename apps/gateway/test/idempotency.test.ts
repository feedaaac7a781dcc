import { createHash } from 'node:crypto';
import { randomId, waitFor } from '@herald/testing';
import { describe, expect, it } from 'vitest';
import { IdempotencyStore } from '../src/idempotency.js';
import { notificationId } from '../src/notification-ids.js';
import { API_KEY_2, auth, buildTestApp, disposeTestApp, everyPartition, testAppForFile } from './helpers.js';

const app = await testAppForFile({
  HERALD_RATE_LIMIT_BURST: '1000',
  HERALD_SENDER_RATE_LIMIT_BURST: '1000',
  HERALD_IDEMPOTENCY_IN_FLIGHT_MS: '1000',
});

// Keys that live 60 s (the least HERALD_IDEMPOTENCY_TTL_SECONDS takes), for what comes after.
const shortLived = await testAppForFile({
  HERALD_RATE_LIMIT_BURST: '1000',
  HERALD_SENDER_RATE_LIMIT_BURST: '1000',
  HERALD_IDEMPOTENCY_TTL_SECONDS: '60',
});

const send = (key: string, body: object, headers: Record<string, string> = auth) =>
  app.inject({
    method: 'POST',
    url: '/notify',
    headers: { ...headers, 'idempotency-key': key },
    payload: body,
  });

describe('Idempotency-Key', () => {
  it('replays the first answer for the same key and body, and enqueues nothing new', async () => {
    const key = randomId('idem');
    const body = { userId: 'idem-user', payload: { n: 1, nested: { a: 1, b: 2 } } };
    const first = await send(key, body);
    expect(first.statusCode).toBe(202);
    expect(first.headers['idempotency-replayed']).toBeUndefined();
    // Same body with keys in another order is the same request.
    const again = await send(key, { payload: { nested: { b: 2, a: 1 }, n: 1 }, userId: 'idem-user' });
    expect(again.statusCode).toBe(202);
    expect(again.headers['idempotency-replayed']).toBe('true');
    expect(again.json()).toEqual(first.json());
    expect(
      await everyPartition(app).getJobCountByTypes('waiting', 'delayed', 'prioritized', 'completed'),
    ).toBe(1);
  });

  it('answers 422 for the same key with a different body', async () => {
    const key = randomId('idem');
    expect((await send(key, { userId: 'u1', payload: { n: 1 } })).statusCode).toBe(202);
    const response = await send(key, { userId: 'u1', payload: { n: 2 } });
    expect(response.statusCode).toBe(422);
    expect(response.json()).toMatchObject({ code: 'HERALD_ERR_IDEMPOTENCY_MISMATCH' });
  });

  it('answers 422 for the same key on another route, saying so rather than blaming the body', async () => {
    const key = randomId('idem');
    const item = { userId: 'u1', payload: { n: 1 } };
    expect((await send(key, item)).statusCode).toBe(202);
    const batch = await app.inject({
      method: 'POST',
      url: '/notify/batch',
      headers: { ...auth, 'idempotency-key': key },
      payload: { notifications: [item] },
    });
    expect(batch.statusCode).toBe(422);
    expect(batch.json()).toMatchObject({ code: 'HERALD_ERR_IDEMPOTENCY_MISMATCH' });
    expect(batch.json().error).toContain('another route');
  });

  it('scopes keys to the API key: another sender may use the same key', async () => {
    const key = randomId('idem');
    const body = { userId: 'u2', payload: {} };
    const mine = await send(key, body);
    const theirs = await send(key, body, { authorization: `Bearer ${API_KEY_2}` });
    expect(mine.statusCode).toBe(202);
    expect(theirs.statusCode).toBe(202);
    expect(theirs.headers['idempotency-replayed']).toBeUndefined();
    expect(theirs.json<{ id: string }>().id).not.toBe(mine.json<{ id: string }>().id);
  });

  it('refuses a key over 255 characters with 400', async () => {
    const response = await send('k'.repeat(256), { userId: 'u', payload: {} });
    expect(response.statusCode).toBe(400);
    expect(response.json<{ details: { field: string }[] }>().details[0]?.field).toBe(
      'headers.idempotency-key',
    );
  });

  it('50 concurrent requests with one key enqueue exactly one job; the others get 409 or the replay', async () => {
    const queueBefore = await everyPartition(app).getJobCountByTypes(
      'waiting',
      'delayed',
      'prioritized',
      'completed',
    );
    const key = randomId('idem');
    const body = { userId: 'concurrent', payload: { once: true } };
    const responses = await Promise.all(Array.from({ length: 50 }, () => send(key, body)));
    const statuses = responses.map((response) => response.statusCode);
    expect(statuses.filter((status) => status === 202).length).toBeGreaterThanOrEqual(1);
    expect(statuses.every((status) => status === 202 || status === 409)).toBe(true);
    const ids = new Set(
      responses.filter((r) => r.statusCode === 202).map((r) => r.json<{ id: string }>().id),
    );
    expect(ids.size).toBe(1);
    expect(
      await everyPartition(app).getJobCountByTypes('waiting', 'delayed', 'prioritized', 'completed'),
    ).toBe(queueBefore + 1);
    const conflict = responses.find((response) => response.statusCode === 409);
    if (conflict) expect(conflict.json()).toMatchObject({ code: 'HERALD_ERR_IDEMPOTENCY_IN_FLIGHT' });
  });

  it('still replays after the job completed and BullMQ removed it', async () => {
    const key = randomId('idem');
    const body = { userId: 'removed', payload: {} };
    const first = await send(key, body);
    const id = first.json<{ id: string }>().id;
    const job = await everyPartition(app).getJob(id);
    await job?.remove();
    expect(await everyPartition(app).getJob(id)).toBeUndefined();

    const replay = await send(key, body);
    expect(replay.statusCode).toBe(202);
    expect(replay.headers['idempotency-replayed']).toBe('true');
    expect(replay.json<{ id: string }>().id).toBe(id);
    expect(await everyPartition(app).getJob(id)).toBeUndefined();
  });

  it('a refused request (429) releases the key so a retry can succeed', async () => {
    const limited = await buildTestApp({
      HERALD_RATE_LIMIT_BURST: '1',
      HERALD_RATE_LIMIT_PER_SECOND: '0.001',
    });
    try {
      const sendTo = (key: string, userId: string) =>
        limited.inject({
          method: 'POST',
          url: '/notify',
          headers: { ...auth, 'idempotency-key': key },
          payload: { userId, payload: {} },
        });
      expect((await sendTo(randomId('idem'), 'busy')).statusCode).toBe(202);
      const key = randomId('idem');
      expect((await sendTo(key, 'busy')).statusCode).toBe(429);
      // Not stored as the answer: the same key is free again (and refused again for the same reason).
      expect((await sendTo(key, 'busy')).statusCode).toBe(429);
    } finally {
      await disposeTestApp(limited);
    }
  });

  it('a claim left by a gateway that died mid-request holds the key for HERALD_IDEMPOTENCY_IN_FLIGHT_MS only, then a retry is accepted once', async () => {
    const key = randomId('idem');
    const body = { userId: 'idem-dead', payload: { n: 1 } };
    // What a gateway killed after its claim leaves behind: the claim, never completed nor released.
    const scope = (await app.apiKeys.authenticate(auth.authorization.slice('Bearer '.length)))?.id ?? '';
    const fingerprint = IdempotencyStore.fingerprint({ route: '/notify', body });
    const claimed = await app.idempotency.begin(scope, key, fingerprint, randomId('dead-owner'));
    if (claimed.state !== 'new') throw new Error(`claimed: ${claimed.state}`);
    expect((await send(key, body)).statusCode).toBe(409);
    const accepted = await waitFor(
      async () => {
        const response = await send(key, body);
        return response.statusCode === 202 && response;
      },
      { timeoutMs: 5000, intervalMs: 100, what: 'the dead claim to expire' },
    );
    // The id the dead gateway's request had: had it enqueued, the inbox stores it once.
    expect(accepted.json<{ id: string }>().id).toBe(
      notificationId(body.userId, IdempotencyStore.derivedId(scope, key, fingerprint, claimed.epoch)),
    );
    expect((await send(key, body)).headers['idempotency-replayed']).toBe('true');
  });

  it('a key whose record is gone (deleted) within its 24 h: the same body is the same notification again (never delivered twice), another body a new one (never dropped)', async () => {
    const key = randomId('idem');
    const body = { userId: 'idem-deleted', payload: { v: 1 } };
    const first = (await send(key, body)).json<{ id: string }>().id;
    const scope = (await app.apiKeys.authenticate(auth.authorization.slice('Bearer '.length)))?.id ?? '';
    const record = `${app.config.keyPrefix}idem:{${scope}}:${createHash('sha256').update(key).digest('hex')}`;
    expect(await app.redis.del(record)).toBe(1);

    const retry = await send(key, body);
    expect(retry.statusCode).toBe(202);
    expect(retry.json<{ id: string }>().id).toBe(first);
    expect(await app.redis.del(record)).toBe(1);
    // Another notification under the old key: before, it got the first one's id, and the inbox, which
    // stores an id once, dropped it after its 202.
    const other = await send(key, { ...body, payload: { v: 2 } });
    expect(other.statusCode).toBe(202);
    expect(other.json<{ id: string }>().id).not.toBe(first);
    expect(await everyPartition(app).getJob(other.json<{ id: string }>().id)).toBeDefined();
  });
});

describe('Idempotency-Key after HERALD_IDEMPOTENCY_TTL_SECONDS', () => {
  // The key's lifetime passes in Redis, not in the test: its record expires when Redis says so (its PX is
  // checked to be the setting), and its epoch (idempotency-begin-1.lua: the Redis time of the lifetime's
  // first claim, which outlives the record) is moved back by the lifetime, which is what 60 s of waiting
  // did to it (the test waited a real minute, on both topologies of CI, before).
  it('is a new request, even with the same body: a new id, enqueued (before: the first one’s id, dropped by the inbox)', async () => {
    const key = randomId('idem');
    const body = { userId: 'idem-later', payload: { n: 1 } };
    const sendLater = () =>
      shortLived.inject({
        method: 'POST',
        url: '/notify',
        headers: { ...auth, 'idempotency-key': key },
        payload: body,
      });
    const first = await sendLater();
    expect(first.statusCode).toBe(202);
    const firstId = first.json<{ id: string }>().id;
    const scope =
      (await shortLived.apiKeys.authenticate(auth.authorization.slice('Bearer '.length)))?.id ?? '';
    const hash = createHash('sha256').update(key).digest('hex');
    const record = `${shortLived.config.keyPrefix}idem:{${scope}}:${hash}`;
    const epochKey = `${shortLived.config.keyPrefix}idem:{${scope}}:e:${hash}`;
    const redis = shortLived.redis;
    // The record lives HERALD_IDEMPOTENCY_TTL_SECONDS, the epoch longer.
    const recordTtl = await redis.pttl(record);
    expect(recordTtl).toBeGreaterThan(50_000);
    expect(recordTtl).toBeLessThanOrEqual(60_000);
    expect(await redis.pttl(epochKey)).toBeGreaterThan(60_000);
    // Within the lifetime: replayed.
    expect((await sendLater()).headers['idempotency-replayed']).toBe('true');

    // The lifetime passes: the epoch is 60 s older, the record expires (Redis's own expiry).
    const epoch = Number(await redis.get(epochKey));
    expect(epoch).toBeGreaterThan(0);
    expect(await redis.set(epochKey, String(epoch - 60_000), 'KEEPTTL')).toBe('OK');
    expect(await redis.pexpire(record, 1)).toBe(1);
    await waitFor(async () => (await redis.exists(record)) === 0, {
      timeoutMs: 5000,
      what: 'the record to expire',
    });

    const later = await sendLater();
    expect(later.statusCode).toBe(202);
    expect(later.headers['idempotency-replayed']).toBeUndefined();
    const laterId = later.json<{ id: string }>().id;
    expect(laterId).not.toBe(firstId);
    expect(await everyPartition(shortLived).getJob(laterId)).toBeDefined();
    // The new request's answer is the key's answer now, for a new lifetime.
    const replay = await sendLater();
    expect(replay.headers['idempotency-replayed']).toBe('true');
    expect(replay.json<{ id: string }>().id).toBe(laterId);
    expect(Number(await redis.get(epochKey))).toBeGreaterThanOrEqual(epoch);
  });
});
