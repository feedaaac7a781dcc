import { Agent, request as httpRequest } from 'node:http';
import { createRequire } from 'node:module';
import {
  type AppProcess,
  deleteMatching,
  keysMatching,
  startApp,
  startRedisServer,
  testRedis,
  waitFor,
} from '@herald/testing';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from '../src/keys.js';
import { testEnv } from './helpers.js';

const entry = createRequire(import.meta.url).resolve('@herald/gateway/server');

describe('API keys stored in Redis, managed by `herald keys`', () => {
  const env = testEnv({
    HERALD_API_KEYS: 'none',
    HERALD_RATE_LIMIT_BURST: '10000',
    HERALD_SENDER_RATE_LIMIT_BURST: '10000',
  });
  const gateways: AppProcess[] = [];
  let redis: Redis | Cluster;

  beforeAll(async () => {
    redis = testRedis();
    gateways.push(...(await Promise.all([1, 2].map((n) => startApp({ name: `gateway-${n}`, entry, env })))));
  });
  afterAll(async () => {
    await Promise.all(gateways.map((gateway) => gateway.stop()));
    await deleteMatching(redis, `${env.HERALD_KEY_PREFIX}*`);
    redis.disconnect();
  });

  async function cli(args: string[]): Promise<{ code: number; out: string[]; err: string[] }> {
    const out: string[] = [];
    const err: string[] = [];
    const code = await run(args, { out: (line) => out.push(line), err: (line) => err.push(line) }, env);
    return { code, out, err };
  }

  let users = 0;
  const randomUserId = () => `connection-user-${users++}`;

  const notify = (gateway: AppProcess, key: string) =>
    fetch(`${gateway.url}/notify`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ userId: 'revocation-user', payload: {} }),
    }).then(async (response) => {
      await response.arrayBuffer();
      return response.status;
    });

  it('stores only the SHA-256 of a created key, with its name and tenant', async () => {
    const created = await cli(['create', '--name', 'shop', '--tenant', 'acme', '--recipient-burst', '5']);
    expect(created.code).toBe(0);
    const key = /key:\s+(hk_\S+)/.exec(created.out.join('\n'))?.[1] as string;
    expect(key).toBeDefined();
    const stored = await keysMatching(redis, `${env.HERALD_KEY_PREFIX}*`);
    const dump = (
      await Promise.all(stored.map((k) => redis.type(k).then((t) => (t === 'hash' ? redis.hgetall(k) : {}))))
    )
      .map((fields) => JSON.stringify(fields))
      .join('\n');
    expect(dump).not.toContain(key);
    expect(dump).toContain('acme');

    const listed = await cli(['list']);
    expect(listed.out.join('\n')).toMatch(/shop\s+tenant=acme .*active.*recipientBurst=5/);
  });

  it('refuses wrong usage with a message and exit code 2', async () => {
    expect((await cli(['create', '--name', 'x'])).code).toBe(2);
    expect(
      (await cli(['create', '--name', 'x', '--tenant', 't', '--sender-burst', '1.5'])).err.join(),
    ).toContain('--sender-burst');
    // Limits beyond what the gateway's own settings take (rates and bursts up to 10^9, rates from 10^-6):
    // a rate of 1e-300 made every decision fail (503), a burst of 1e20 lifted the limit.
    for (const [flag, value] of [
      ['--recipient-rate', '1e-300'],
      ['--sender-burst', '100000000000000000000'],
      ['--recipient-burst', '2000000000'],
      ['--sender-rate', '1e300'],
    ] as const) {
      const refused = await cli(['create', '--name', 'x', '--tenant', 't', flag, value]);
      expect(refused.code, `${flag} ${value}`).toBe(2);
      expect(refused.err.join(), `${flag} ${value}`).toContain(flag);
    }
    // `.` and `..` alone are path segments: /admin/tenants/../webhook is another URL to any HTTP client.
    for (const tenant of ['.', '..', 'a b']) {
      const refused = await cli(['create', '--name', 'x', '--tenant', tenant]);
      expect(refused.code, tenant).not.toBe(0);
      expect(refused.err.join(), tenant).toContain('is not a tenant id');
    }
    expect((await cli(['revoke', 'no-such-id'])).code).toBe(1);
    expect((await cli(['frobnicate'])).code).toBe(2);
    // What a command does not take is refused, never ignored: `revoke a b` revoked a alone, exit 0.
    const created = await cli(['create', '--name', 'kept', '--tenant', 'acme']);
    const id = /id:\s+(\S+)/.exec(created.out.join('\n'))?.[1] as string;
    const twice = await cli(['revoke', id, 'another-id']);
    expect(twice.code).toBe(2);
    expect(twice.err.join('\n')).toMatch(/revoke takes one key id.*another-id/);
    expect((await cli(['list'])).out.join('\n')).toMatch(new RegExp(`${id}\\s+kept .*active`));
    expect((await cli(['revoke', '--all'])).err.join('\n')).toContain("Unknown option '--all'");
    for (const args of [
      ['list', 'extra'],
      ['list', '--json'],
    ]) {
      const refused = await cli(args);
      expect(refused.code, args.join(' ')).toBe(2);
      expect(refused.err.join('\n')).toMatch(/extra|--json/);
    }
  });

  it('on one keep-alive connection each request is authenticated by its own key', async () => {
    const keyOf = (out: string[]) => /key:\s+(hk_\S+)/.exec(out.join('\n'))?.[1] as string;
    const small = keyOf(
      (
        await cli([
          'create',
          '--name',
          'small',
          '--tenant',
          'a',
          '--sender-burst',
          '1',
          '--sender-rate',
          '0.001',
        ])
      ).out,
    );
    const big = keyOf((await cli(['create', '--name', 'big', '--tenant', 'b'])).out);
    // A key of the same length as `small`, never created.
    const unknown = `hk_${'x'.repeat(small.length - 3)}`;
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const gateway = gateways[0] as AppProcess;
    const send = (key: string) =>
      new Promise<{ status: number; reused: boolean; policy: string | undefined }>((resolve, reject) => {
        const req = httpRequest(
          `${gateway.url}/notify`,
          {
            method: 'POST',
            agent,
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          },
          (res) => {
            let body = '';
            res.on('data', (chunk: Buffer) => {
              body += chunk.toString();
            });
            res.on('end', () =>
              resolve({
                status: res.statusCode ?? 0,
                reused: req.reusedSocket,
                policy: res.statusCode === 429 ? (JSON.parse(body) as { policy: string }).policy : undefined,
              }),
            );
          },
        );
        req.on('error', reject);
        req.end(JSON.stringify({ userId: randomUserId(), payload: {} }));
      });
    try {
      const answers = [];
      for (const key of [small, small, big, unknown, big, small]) answers.push(await send(key));
      expect(answers.map((a) => [a.status, a.policy])).toEqual([
        [202, undefined],
        [429, 'sender'], // small's one token is spent
        [202, undefined], // big is big, not small's identity remembered on this connection
        [401, undefined],
        [202, undefined],
        [429, 'sender'],
      ]);
      expect(answers.slice(1).every((a) => a.reused)).toBe(true);
    } finally {
      agent.destroy();
    }
  });

  it('a revoked key is refused by every gateway within 1 s', async () => {
    const created = await cli(['create', '--name', 'to-revoke', '--tenant', 'acme']);
    const key = /key:\s+(hk_\S+)/.exec(created.out.join('\n'))?.[1] as string;
    const id = /id:\s+(\S+)/.exec(created.out.join('\n'))?.[1] as string;
    for (const gateway of gateways) expect(await notify(gateway, key)).toBe(202);

    const revokedAt = Date.now();
    expect((await cli(['revoke', id])).code).toBe(0);
    // Send requests to both gateways until each refuses; record when every accepted one was sent.
    const acceptedSentAfterMs: number[] = [];
    for (const gateway of gateways) {
      await waitFor(
        async () => {
          const sentAfterMs = Date.now() - revokedAt;
          const status = await notify(gateway, key);
          if (status === 202) acceptedSentAfterMs.push(sentAfterMs);
          return status === 401;
        },
        { timeoutMs: 5000, intervalMs: 25, what: `${gateway.name} to refuse the revoked key` },
      );
    }
    // The bound is the gateways' API-key cache (HERALD_API_KEY_CACHE_MS, 500 ms by default).
    expect(acceptedSentAfterMs.every((ms) => ms < 1000)).toBe(true);
    // And from then on it stays refused everywhere.
    for (const gateway of gateways) expect(await notify(gateway, key)).toBe(401);
    expect((await cli(['list'])).out.join('\n')).toMatch(/to-revoke .*REVOKED=/);
  });
  it('per-key limits replace the defaults for that key', async () => {
    const created = await cli([
      'create',
      '--name',
      'tight',
      '--tenant',
      'acme',
      '--sender-burst',
      '2',
      '--sender-rate',
      '0.01',
    ]);
    const key = /key:\s+(hk_\S+)/.exec(created.out.join('\n'))?.[1] as string;
    const gateway = gateways[0] as AppProcess;
    const statuses = [await notify(gateway, key), await notify(gateway, key), await notify(gateway, key)];
    expect(statuses).toEqual([202, 202, 429]);
  });
});

describe('herald keys on a Redis at maxmemory with noeviction (a redis-server of its own)', () => {
  it('create: exit 1 with a line naming the full Redis and what to do, never a stack trace', async () => {
    const redis = await startRedisServer({ args: ['--maxmemory', '1', '--maxmemory-policy', 'noeviction'] });
    try {
      const out: string[] = [];
      const err: string[] = [];
      const code = await run(
        ['create', '--name', 'shop', '--tenant', 'acme'],
        { out: (line) => out.push(line), err: (line) => err.push(line) },
        { REDIS_URL: redis.url },
      );
      expect(code).toBe(1);
      expect(out).toEqual([]);
      expect(err.join('\n')).toMatch(/out of memory.*raise maxmemory/);
    } finally {
      await redis.dispose();
    }
  });
});
