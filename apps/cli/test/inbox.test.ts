import { buildApp } from '@herald/gateway';
import { loadConfig } from '@herald/gateway/operator';
import { Inbox } from '@herald/inbox';
import { deleteMatching, keysMatching, randomId, testRedis, waitFor } from '@herald/testing';
import { startWorker } from '@herald/worker';
import { loadConfig as loadWorkerConfig } from '@herald/worker/operator';
import type { FastifyInstance } from 'fastify';
import type { Cluster, Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from '../src/inbox.js';
import { run as keys } from '../src/keys.js';
import { API_KEY, dropQueue, testEnv } from './helpers.js';

describe('herald inbox migrate: user by user, with --dry-run', () => {
  // The env's HERALD_API_KEYS key is tenant `default`'s: it reads the layout of before tenants.
  const env = testEnv({ HERALD_RATE_LIMIT_BURST: '10000', HERALD_SENDER_RATE_LIMIT_BURST: '10000' });
  const prefix = env.HERALD_INBOX_PREFIX as string;
  let redis: Redis | Cluster;
  let app: FastifyInstance;
  let acmeKey: string;

  beforeAll(async () => {
    redis = testRedis();
    app = await buildApp(loadConfig({ ...env, HERALD_LOG_LEVEL: 'silent' }));
    const created = await cli(keys, ['create', '--name', 'acme-shop', '--tenant', 'acme']);
    acmeKey = /key:\s+(hk_\S+)/.exec(created.out)?.[1] as string;
    expect(acmeKey).toBeDefined();
  });
  afterAll(async () => {
    await app.close();
    await dropQueue(env.HERALD_QUEUE_NAME as string);
    for (const keyPrefix of [prefix, env.HERALD_KEY_PREFIX, env.HERALD_RATE_LIMIT_PREFIX]) {
      await deleteMatching(redis, `${keyPrefix}*`);
    }
    redis.disconnect();
  });

  async function cli(
    command: typeof run,
    args: string[],
  ): Promise<{ code: number; out: string; err: string }> {
    const out: string[] = [];
    const err: string[] = [];
    const code = await command(args, { out: (line) => out.push(line), err: (line) => err.push(line) }, env);
    return { code, out: out.join('\n'), err: err.join('\n') };
  }

  async function call(key: string, url: string) {
    const response = await app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${key}` } });
    return { status: response.statusCode, body: response.json() };
  }

  /** Every key under the inbox prefix with its value (DUMP): what a dry run must leave exactly as it was. */
  async function snapshot() {
    const names = (await keysMatching(redis, `${prefix}*`)).sort();
    return Promise.all(names.map(async (key) => [key, (await redis.dumpBuffer(key))?.toString('hex')]));
  }

  it('keeps a user who already has keys in the tenant’s layout whole in place, moves the others whole; a dry run first changes nothing', async () => {
    // What the deployment wrote before tenants: alice and bob, each three notifications, the first
    // delivered (acked by a tab) and read.
    const legacy = new Inbox(redis, { prefix });
    const alice = randomId('alice');
    const bob = randomId('bob');
    const written: Record<string, string[]> = { [alice]: [], [bob]: [] };
    for (const user of [alice, bob]) {
      for (let n = 0; n < 3; n++) {
        const id = randomId('n');
        await legacy.append({ id, userId: user, payload: { n }, createdAt: new Date().toISOString() });
        written[user]?.push(id);
      }
      const first = written[user]?.[0] as string;
      expect(await legacy.ack(user, [first], 'realtime-old')).toBe(1);
      await legacy.markRead(user, { ids: [first] });
    }
    const [aliceFirst, bobFirst] = [written[alice]?.[0] as string, written[bob]?.[0] as string];

    // The upgraded gateway and worker ran before the migration: acme sent alice a notification, stored
    // in acme's layout (her stream, meta, unread set and that notification's record).
    const worker = await startWorker(loadWorkerConfig(env), pino({ level: 'silent' }));
    let fresh: string;
    try {
      const sent = await app.inject({
        method: 'POST',
        url: '/notify',
        headers: { authorization: `Bearer ${acmeKey}` },
        payload: { userId: alice, payload: { fresh: true } },
      });
      expect(sent.statusCode).toBe(202);
      fresh = sent.json<{ id: string }>().id;
      await waitFor(async () => (await legacy.tenant('acme').status(alice, fresh))?.state === 'inbox', {
        timeoutMs: 20_000,
        what: 'the worker storing acme’s notification to alice',
      });
    } finally {
      await worker.close();
    }

    // The dry run: lists what would move and what would stay, and why; changes nothing.
    const before = await snapshot();
    const dry = await cli(run, ['migrate', '--tenant', 'acme', '--dry-run']);
    expect(dry.code, dry.err).toBe(0);
    expect(await snapshot()).toEqual(before);
    // bob: stream, meta, unread set, three records and their three id index keys.
    expect(dry.out).toContain(
      'dry run, nothing changed: would move 9 keys to tenant acme (1 user, each whole)',
    );
    expect(dry.out).toContain(
      'would keep 1 user in place, whole (none of their keys would move; they stay tenant "default"\'s):',
    );
    expect(dry.out).toContain(
      `  ${alice}: 9 keys kept: tenant acme already has 4 keys of theirs (${prefix}t:acme:{${alice}}:s, `,
    );

    const done = await cli(run, ['migrate', '--tenant', 'acme']);
    expect(done.code, done.err).toBe(0);
    expect(done.out.split('\n')).toEqual([
      'moved 9 keys to tenant acme (1 user, each whole)',
      'kept 1 user in place, whole (none of their keys moved; they stay tenant "default"\'s):',
      expect.stringMatching(
        new RegExp(`^  ${alice}: 9 keys kept: tenant acme already has 4 keys of theirs \\(`),
      ),
    ]);

    // alice's notification of before tenants is the default tenant's still, whole: its status and her
    // inbox (delivered, read) for the default key; nothing of it for acme's key.
    const aliceStatus = await call(API_KEY, `/notifications/${aliceFirst}`);
    expect(aliceStatus).toMatchObject({ status: 200, body: { status: 'delivered', userId: alice } });
    expect((await call(acmeKey, `/notifications/${aliceFirst}`)).status).toBe(404);
    const aliceOld = await call(API_KEY, `/users/${alice}/notifications`);
    expect(aliceOld.body.items.map((item: { id: string }) => item.id)).toEqual(written[alice]);
    expect(aliceOld.body.items[0]).toMatchObject({ read: true, deliveredAt: expect.any(String) });
    expect(aliceOld.body.unread.count).toBe(2);
    const aliceNew = await call(acmeKey, `/users/${alice}/notifications`);
    expect(aliceNew.body.items.map((item: { id: string }) => item.id)).toEqual([fresh]);

    // bob moved whole: acme's now, delivered and read as before; the default tenant has nothing of his.
    expect(await call(acmeKey, `/notifications/${bobFirst}`)).toMatchObject({
      status: 200,
      body: { status: 'delivered', userId: bob },
    });
    expect((await call(API_KEY, `/notifications/${bobFirst}`)).status).toBe(404);
    const bobNew = await call(acmeKey, `/users/${bob}/notifications`);
    expect(bobNew.body.items.map((item: { id: string }) => item.id)).toEqual(written[bob]);
    expect(bobNew.body.items.map((item: { read: boolean }) => item.read)).toEqual([true, false, false]);
    expect(bobNew.body.items[0].deliveredAt).toEqual(expect.any(String));
    expect((await call(API_KEY, `/users/${bob}/notifications`)).body.items).toEqual([]);

    // Again: nothing more moves, alice is kept and listed again.
    const again = await cli(run, ['migrate', '--tenant', 'acme']);
    expect(again.code).toBe(0);
    expect(again.out).toContain('moved 0 keys to tenant acme (0 users, each whole)');
    expect(again.out).toContain(`  ${alice}: 9 keys kept`);
  });

  it('refuses wrong usage with exit code 2', async () => {
    expect((await cli(run, ['migrate'])).code).toBe(2);
    expect((await cli(run, ['migrate', '--tenant', 'default'])).code).toBe(2);
    expect((await cli(run, ['migrate', '--tenant', 'acme', '--dry-run=yes'])).code).toBe(2);
    // An id that is no tenant id is named as such (it was told to pick one other than "default").
    const invalid = await cli(run, ['migrate', '--tenant', 'a b']);
    expect(invalid.code).toBe(2);
    expect(invalid.err).toMatch(/^--tenant "a b" is not a tenant id: use 1 to 64 of A-Z a-z 0-9 _ \. -/);
  });
});
