import { fileURLToPath } from 'node:url';
import type { AdminSnapshot } from '@herald/protocol';
import { type AppProcess, randomId, skewedClock, startApp, waitFor } from '@herald/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_KEY, testEnv } from './helpers.js';

const entry = fileURLToPath(new URL('../dist/server.js', import.meta.url));
const ADMIN_KEY = 'admin-key-0123456789abcdef0123456789abcdef';

describe('the admin API across gateway processes', () => {
  const gateways: AppProcess[] = [];

  beforeAll(async () => {
    // Burst 10, refilled at 1 token per 10 s: the 15 requests below cannot earn an 11th token.
    const env = testEnv({
      HERALD_ADMIN_KEY: ADMIN_KEY,
      HERALD_RATE_LIMIT_BURST: '10',
      HERALD_RATE_LIMIT_PER_SECOND: '0.1',
    });
    gateways.push(...(await Promise.all([1, 2].map((n) => startApp({ name: `gateway-${n}`, entry, env })))));
  });
  afterAll(async () => {
    await Promise.all(gateways.map((gateway) => gateway.stop()));
  });

  it('sums every instance’s per-second decisions, and any instance answers the same totals', async () => {
    const [a, b] = gateways as [AppProcess, AppProcess];
    const flooded = randomId('flooded');
    const quiet = randomId('quiet');
    const statuses = await Promise.all([
      ...Array.from({ length: 15 }, (_, i) => post(i % 2 === 0 ? a : b, flooded)),
      post(b, quiet),
    ]);
    expect(statuses.filter((status) => status === 202)).toHaveLength(11);

    const expected = (snapshot: AdminSnapshot) =>
      sum(snapshot.traffic.allowed) === 11 && sum(snapshot.traffic.denied) === 5;
    const fromA = await waitFor(
      async () => {
        const snapshot = await read(a);
        return expected(snapshot) ? snapshot : undefined;
      },
      { timeoutMs: 5000, what: 'both instances’ flushes in the snapshot' },
    );
    expect(fromA.traffic.deniedByPolicy).toEqual({ recipient: 5 });
    expect(fromA.hotUsers.map(({ userId, decisions, denied }) => ({ userId, decisions, denied }))).toEqual([
      { userId: flooded, decisions: 15, denied: 5 },
      { userId: quiet, decisions: 1, denied: 0 },
    ]);
    expect(fromA.hotUsers[0]?.tokens).toMatchObject({ remaining: 0, limit: 10 });
    const fromB = await read(b);
    expect(expected(fromB)).toBe(true);
    expect(fromB.hotUsers.map((user) => user.userId)).toEqual([flooded, quiet]);
  });
});

describe('the admin API across gateways whose clocks disagree', () => {
  const gateways: AppProcess[] = [];

  beforeAll(async () => {
    const env = testEnv({ HERALD_ADMIN_KEY: ADMIN_KEY });
    gateways.push(
      ...(await Promise.all([
        startApp({ name: 'gateway-on-time', entry, env }),
        // 150 s behind (libfaketime): its seconds were written 150 s in the past, outside the last
        // minute the others read, and expired before anyone read them.
        startApp({
          name: 'gateway-behind',
          entry,
          env: { ...env, ...skewedClock('-150s') },
        }),
      ])),
    );
  });
  afterAll(async () => {
    await Promise.all(gateways.map((gateway) => gateway.stop()));
  });

  it('a gateway 150 s behind: its decisions count in the other’s snapshot, on Redis’s clock', async () => {
    const [onTime, behind] = gateways as [AppProcess, AppProcess];
    const user = randomId('skewed');
    for (let n = 0; n < 3; n++) expect(await post(behind, user)).toBe(202);
    const snapshot = await waitFor(
      async () => {
        const current = await read(onTime);
        return sum(current.traffic.allowed) === 3 ? current : undefined;
      },
      { timeoutMs: 5000, what: 'the gateway behind’s decisions in the snapshot' },
    );
    expect(snapshot.hotUsers.map(({ userId, decisions }) => ({ userId, decisions }))).toEqual([
      { userId: user, decisions: 3 },
    ]);
  });
});

const sum = (values: readonly number[]) => values.reduce((total, value) => total + value, 0);

async function read(gateway: AppProcess): Promise<AdminSnapshot> {
  const response = await fetch(`${gateway.url}/admin/snapshot`, {
    headers: { authorization: `Bearer ${ADMIN_KEY}` },
  });
  expect(response.status).toBe(200);
  return (await response.json()) as AdminSnapshot;
}

async function post(gateway: AppProcess, userId: string): Promise<number> {
  const response = await fetch(`${gateway.url}/notify`, {
    method: 'POST',
    headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ userId, payload: {} }),
  });
  await response.arrayBuffer();
  return response.status;
}
