import { isolatedEnv, randomId } from '@herald/testing';
import type { FastifyInstance } from 'fastify';
import { afterAll, describe, expect, it } from 'vitest';
import { API_KEY, API_KEY_2, buildTestApp, disposeTestApp } from './helpers.js';

// A rotation of HERALD_API_KEYS rolled out one gateway at a time: gateway A still has OLD,NEW, gateway B
// has NEW alone, on one Redis. Each key must be the same sender on both: its idempotency records and
// its sender bucket are its own, wherever it stands in the list.
const OLD = API_KEY;
const NEW = API_KEY_2;
const shared = isolatedEnv();
const apps: FastifyInstance[] = [];
afterAll(async () => {
  for (const app of apps) await disposeTestApp(app);
});

async function gateway(keys: string): Promise<FastifyInstance> {
  const app = await buildTestApp({
    ...shared,
    HERALD_API_KEYS: keys,
    HERALD_SENDER_RATE_LIMIT_BURST: '3',
    HERALD_SENDER_RATE_LIMIT_PER_SECOND: '0.01',
  });
  apps.push(app);
  return app;
}

const a = await gateway(`${OLD},${NEW}`);
const b = await gateway(NEW);

const send = (app: FastifyInstance, key: string, userId: string, idempotencyKey?: string) =>
  app.inject({
    method: 'POST',
    url: '/notify',
    headers: {
      authorization: `Bearer ${key}`,
      ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}),
    },
    payload: { userId, payload: {} },
  });

describe('HERALD_API_KEYS: a key is the same sender whatever its place in the list', () => {
  it('has one id on every gateway, and another key never has it', async () => {
    const idOn = async (app: FastifyInstance, key: string) => (await app.apiKeys.authenticate(key))?.id;
    const newOnA = await idOn(a, NEW);
    expect(newOnA).toBeDefined();
    expect(await idOn(b, NEW)).toBe(newOnA);
    expect(await idOn(a, OLD)).not.toBe(newOnA);
    expect(await idOn(b, OLD)).toBeUndefined();
  });

  it('an Idempotency-Key of OLD is not replayed to NEW (before: NEW took OLD’s place and its answer)', async () => {
    const key = randomId('idem');
    const first = await send(a, OLD, 'rotation-user', key);
    expect(first.statusCode).toBe(202);
    const other = await send(b, NEW, 'rotation-user', key);
    expect(other.statusCode).toBe(202);
    expect(other.headers['idempotency-replayed']).toBeUndefined();
    expect(other.json<{ id: string }>().id).not.toBe(first.json<{ id: string }>().id);
  });

  it('NEW has one sender bucket on both gateways, OLD another', async () => {
    const statuses: number[] = [];
    for (const app of [a, b, a, b]) statuses.push((await send(app, NEW, randomId('u'))).statusCode);
    // Burst 3, with one taken by the test before: 202, 202, 429, 429 (shared), not 3 + 3.
    expect(statuses.filter((status) => status === 202).length).toBeLessThanOrEqual(2);
    expect(statuses.at(-1)).toBe(429);
    expect((await send(a, OLD, randomId('u'))).statusCode).toBe(202);
  });
});
