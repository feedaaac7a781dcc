import { randomUUID } from 'node:crypto';
import { buildApp } from '@herald/gateway';
import { envKeyId, loadConfig } from '@herald/gateway/operator';
import { waitFor } from '@herald/testing';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run as keys } from '../src/keys.js';
import { run } from '../src/limits.js';
import { API_KEY, auth, dropQueue, testEnv } from './helpers.js';

describe('herald limits peek|reset', () => {
  const env = testEnv({
    HERALD_RATE_LIMIT_PER_SECOND: '0.001',
    HERALD_SENDER_RATE_LIMIT_PER_SECOND: '0.001',
  });
  let app: FastifyInstance;
  beforeAll(async () => {
    app = await buildApp(loadConfig({ ...env, HERALD_LOG_LEVEL: 'silent' }));
  });
  afterAll(async () => {
    await app.close();
    await dropQueue(env.HERALD_QUEUE_NAME as string);
  });

  async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
    const out: string[] = [];
    const err: string[] = [];
    const code = await run(args, { out: (line) => out.push(line), err: (line) => err.push(line) }, env);
    return { code, out: out.join('\n'), err: err.join('\n') };
  }

  /** A notification to `userId` through the gateway: takes a token of the recipient and of the sender. */
  const notify = (userId: string) =>
    app.inject({ method: 'POST', url: '/notify', headers: auth, payload: { userId, payload: {} } });

  it('shows a recipient’s and a sender’s tokens without taking any, and refills them', async () => {
    for (let i = 0; i < 3; i++) expect((await notify('ops-user')).statusCode).toBe(202);
    const peek = await cli(['peek', '--user', 'ops-user', '--key', envKeyId(API_KEY)]);
    expect(peek.code).toBe(0);
    expect(peek.out).toContain('recipient ops-user: 7 of 10 tokens');
    expect(peek.out).toContain(`sender ${envKeyId(API_KEY)}: 197 of 200 tokens`);
    // Peeking took nothing.
    expect((await cli(['peek', '--user', 'ops-user'])).out).toContain('7 of 10');

    expect((await cli(['reset', '--user', 'ops-user'])).code).toBe(0);
    expect((await cli(['peek', '--user', 'ops-user'])).out).toContain('recipient ops-user: 10 of 10 tokens');
  });

  it('reads the buckets of the tenant named by --tenant (default: the tenant of HERALD_API_KEYS)', async () => {
    expect((await notify('tenant-user')).statusCode).toBe(202);
    expect((await cli(['peek', '--user', 'tenant-user'])).out).toContain('9 of 10');
    expect((await cli(['peek', '--user', 'tenant-user', '--tenant', 'default'])).out).toContain('9 of 10');
    // Another tenant's user of the same name has its own, untouched bucket.
    expect((await cli(['peek', '--user', 'tenant-user', '--tenant', 'acme'])).out).toContain('10 of 10');
    expect((await cli(['peek', '--user', 'tenant-user', '--tenant', 'not/a/tenant'])).code).toBe(2);
  });

  /** `herald keys create` with `options`: the new key's id and the key itself. */
  async function createKey(options: string[]): Promise<{ id: string; key: string }> {
    const out: string[] = [];
    const code = await keys(
      ['create', '--name', 'limits-test', ...options],
      { out: (line) => out.push(line), err: () => {} },
      env,
    );
    expect(code).toBe(0);
    const field = (name: string) =>
      new RegExp(`^${name}:\\s+(\\S+)`, 'm').exec(out.join('\n'))?.[1] as string;
    return { id: field('id'), key: field('key') };
  }

  it('with --key, reads that key’s own buckets: its tenant and its own limits, not the defaults', async () => {
    const tenant = `t${randomUUID().slice(0, 8)}`;
    const { id, key } = await createKey([
      '--tenant',
      tenant,
      '--sender-burst',
      '50',
      '--sender-rate',
      '0.001',
      '--recipient-burst',
      '4',
      '--recipient-rate',
      '0.001',
    ]);
    for (let i = 0; i < 3; i++) {
      const sent = await app.inject({
        method: 'POST',
        url: '/notify',
        headers: { authorization: `Bearer ${key}` },
        payload: { userId: 'own-limits', payload: {} },
      });
      expect(sent.statusCode).toBe(202);
    }
    const peek = await cli(['peek', '--user', 'own-limits', '--key', id]);
    expect(peek).toMatchObject({ code: 0 });
    expect(peek.out).toContain(`sender ${id}: 47 of 50 tokens`);
    expect(peek.out).toContain('recipient own-limits: 1 of 4 tokens');
    // Its tenant named again is fine; another tenant is not this key's.
    expect((await cli(['peek', '--user', 'own-limits', '--key', id, '--tenant', tenant])).out).toContain(
      '47 of 50',
    );
    const other = await cli(['peek', '--user', 'own-limits', '--key', id, '--tenant', 'acme']);
    expect(other).toMatchObject({ code: 2 });
    expect(other.err).toContain(`key ${id} belongs to tenant ${tenant}, not acme`);

    expect((await cli(['reset', '--user', 'own-limits', '--key', id])).code).toBe(0);
    const after = await cli(['peek', '--user', 'own-limits', '--key', id]);
    expect(after.out).toContain(`sender ${id}: 50 of 50 tokens`);
    expect(after.out).toContain('recipient own-limits: 4 of 4 tokens');
  });

  it('without --key, reset refills the user’s buckets of every limit set of the tenant’s keys, and peek shows them (before: a key with its own recipient limits stayed refused after "full again")', async () => {
    const tenant = `t${randomUUID().slice(0, 8)}`;
    const { key } = await createKey([
      '--tenant',
      tenant,
      '--recipient-burst',
      '3',
      '--recipient-rate',
      '0.001',
    ]);
    const send = () =>
      app.inject({
        method: 'POST',
        url: '/notify',
        headers: { authorization: `Bearer ${key}` },
        payload: { userId: 'strict-user', payload: {} },
      });
    for (let i = 0; i < 3; i++) expect((await send()).statusCode).toBe(202);
    expect((await send()).statusCode).toBe(429);
    const peek = await cli(['peek', '--user', 'strict-user', '--tenant', tenant]);
    expect(peek.out).toContain('recipient strict-user (keys with burst 3, 0.001/s): 0 of 3 tokens');
    const reset = await cli(['reset', '--user', 'strict-user', '--tenant', tenant]);
    expect(reset.code).toBe(0);
    expect(reset.out).toContain('burst 3');
    // The gateway that refused it asks Redis again within 1 s (its deny cache).
    await waitFor(async () => (await send()).statusCode === 202, {
      timeoutMs: 5000,
      what: 'a send accepted',
    });
  });

  it('refuses a key id that names no key, and a user id POST /notify would refuse', async () => {
    const unknown = await cli(['peek', '--user', 'alice', '--key', 'no-such-key']);
    expect(unknown).toMatchObject({ code: 1 });
    expect(unknown.err).toContain('no key with id no-such-key');
    const badUser = await cli(['reset', '--user', 'bad user']);
    expect(badUser).toMatchObject({ code: 2 });
    expect(badUser.err).toContain('--user "bad user" is not a user id');
  });

  it('refuses wrong usage with exit code 2', async () => {
    expect((await cli(['peek'])).code).toBe(2);
    expect((await cli(['frobnicate'])).code).toBe(2);
    expect((await cli(['peek', '--usr', 'x'])).code).toBe(2);
  });
});
