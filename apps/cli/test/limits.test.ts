import { buildApp } from '@herald/gateway';
import { loadConfig } from '@herald/gateway/operator';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from '../src/limits.js';
import { auth, dropQueue, testEnv } from './helpers.js';

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
    const peek = await cli(['peek', '--user', 'ops-user', '--key', 'env-1']);
    expect(peek.code).toBe(0);
    expect(peek.out).toContain('recipient ops-user: 7 of 10 tokens');
    expect(peek.out).toContain('sender env-1: 197 of 200 tokens');
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

  it('refuses wrong usage with exit code 2', async () => {
    expect((await cli(['peek'])).code).toBe(2);
    expect((await cli(['frobnicate'])).code).toBe(2);
    expect((await cli(['peek', '--usr', 'x'])).code).toBe(2);
  });
});
