import { fileURLToPath } from 'node:url';
import { type AppProcess, randomId, startApp } from '@herald/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_KEY, testEnv } from './helpers.js';

const entry = fileURLToPath(new URL('../dist/server.js', import.meta.url));

describe('one limit shared by several gateway processes', () => {
  const gateways: AppProcess[] = [];

  beforeAll(async () => {
    const env = testEnv({
      // Burst 10 as the default; refill slowed to one token per 100 s so that the 30 requests cannot
      // earn an 11th token while they run (at 1/s they did, once, on a 2-core machine at load 20).
      HERALD_RATE_LIMIT_BURST: '10',
      HERALD_RATE_LIMIT_PER_SECOND: '0.01',
    });
    gateways.push(
      ...(await Promise.all([1, 2, 3].map((n) => startApp({ name: `gateway-${n}`, entry, env })))),
    );
  });
  afterAll(async () => {
    await Promise.all(gateways.map((gateway) => gateway.stop()));
  });

  it('admits exactly the burst of 30 concurrent requests for one user, whichever instance they hit', async () => {
    const userId = randomId('user');
    // Warm every instance (connections, JIT) with another user, so the burst below is not spread out.
    await Promise.all(gateways.map((gateway) => post(gateway, randomId('warm'))));

    const statuses = await Promise.all(
      Array.from({ length: 30 }, (_, i) => post(gateways[i % gateways.length] as AppProcess, userId)),
    );
    const accepted = statuses.filter((status) => status === 202).length;
    const limited = statuses.filter((status) => status === 429).length;
    expect({ accepted, limited }).toEqual({ accepted: 10, limited: 20 });
  });
});

async function post(gateway: AppProcess, userId: string): Promise<number> {
  const response = await fetch(`${gateway.url}/notify`, {
    method: 'POST',
    headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ userId, payload: { n: 1 } }),
  });
  await response.arrayBuffer();
  return response.status;
}
