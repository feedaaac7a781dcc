import { fileURLToPath } from 'node:url';
import { randomId, redisUrl, waitFor } from '@herald/testing';
import { describe, expect, it } from 'vitest';
import { auth, buildTestApp, disposeTestApp, gatewayOnOwnRedis, testEnv } from './helpers.js';

describe('Redis stopped: 503 fast, never a 202 that is not in Redis; recovers by itself', () => {
  const own = gatewayOnOwnRedis({ HERALD_RATE_LIMIT_BURST: '1000' });

  const notify = (userId: string) =>
    own.app.inject({ method: 'POST', url: '/notify', headers: auth, payload: { userId, payload: {} } });

  it('answers 503 with Retry-After within the Redis timeout while Redis is down, then 202 again', async () => {
    expect((await notify('before')).statusCode).toBe(202);

    await own.redis.stop();
    const accepted: string[] = [];
    for (let i = 0; i < 20; i++) {
      const started = Date.now();
      const response = await notify(`during-${i}`);
      const tookMs = Date.now() - started;
      expect(response.statusCode, response.body).toBe(503);
      expect(response.headers['retry-after']).toMatch(/^\d+$/);
      expect(response.json()).toMatchObject({ code: 'HERALD_ERR_UNAVAILABLE' });
      // The bound is the gateway's own redisTimeoutMs (800 ms) plus scheduling: "within 1 s".
      expect(tookMs).toBeLessThan(1000);
      if (response.statusCode === 202) accepted.push(response.json<{ id: string }>().id);
    }
    expect(accepted).toEqual([]);
    const health = await own.app.inject({ method: 'GET', url: '/readyz' });
    expect(health.statusCode).toBe(503);

    await own.redis.restart();
    const id = await waitFor(
      async () => {
        const response = await notify(randomId('after'));
        return response.statusCode === 202 ? response.json<{ id: string }>().id : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 100, what: 'a 202 after Redis came back' },
    );
    expect(await own.app.queue.getJob(id)).toBeDefined();
    expect((await own.app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
  });
});

describe('a long Redis outage: every connection is back within moments of Redis', () => {
  const own = gatewayOnOwnRedis({ HERALD_RATE_LIMIT_BURST: '1000' });

  it('after 12 s down, a 202 within 3 s of Redis answering again (no reconnect backoff grown to seconds)', async () => {
    const notify = (userId: string) =>
      own.app.inject({ method: 'POST', url: '/notify', headers: auth, payload: { userId, payload: {} } });
    expect((await notify('before')).statusCode).toBe(202);
    await own.redis.stop();
    // Requests meanwhile, as a backend keeps sending: every one a 503.
    const downUntil = Date.now() + 12_000;
    const during: number[] = [];
    await waitFor(
      async () => {
        during.push((await notify(randomId('during'))).statusCode);
        return Date.now() >= downUntil;
      },
      { timeoutMs: 20_000, intervalMs: 500, what: '12 s of outage' },
    );
    expect(new Set(during)).toEqual(new Set([503]));
    await own.redis.restart();
    // BullMQ's own reconnect backoff grows to 8 s and more (exp(attempts), up to 20 s) and ioredis's to
    // 2 s: the queue came back up to ~8 s after Redis did (the chaos suite's 'Redis stopped' scenario).
    await waitFor(async () => (await notify(randomId('after'))).statusCode === 202, {
      timeoutMs: 3000,
      intervalMs: 100,
      what: 'a 202 within 3 s of Redis answering again',
    });
  });
});

describe('HERALD_DURABILITY=aof', () => {
  it('refuses to start, saying why, on a Redis without WAITAOF (before 7.2)', async () => {
    const { Redis } = await import('ioredis');
    const probe = new Redis(redisUrl());
    const info = (await probe.call('COMMAND', 'INFO', 'WAITAOF')) as unknown[];
    probe.disconnect();
    if (Array.isArray(info) && info[0]) {
      // This Redis has WAITAOF: the gateway starts and a 202 waits for the AOF.
      const app = await buildTestApp({ HERALD_DURABILITY: 'aof' });
      const response = await app.inject({
        method: 'POST',
        url: '/notify',
        headers: auth,
        payload: { userId: 'aof', payload: {} },
      });
      expect([202, 503]).toContain(response.statusCode);
      await disposeTestApp(app);
      return;
    }
    await expect(buildTestApp({ HERALD_DURABILITY: 'aof' })).rejects.toThrow(
      /WAITAOF \(Redis 7\.2 or newer\)/,
    );
    // The process: exit 1 and that one message, as for any setting refused at start (before: an
    // uncaught exception and its stack trace).
    const { spawnSync } = await import('node:child_process');
    const entry = fileURLToPath(new URL('../dist/server.js', import.meta.url));
    const run = spawnSync(process.execPath, [entry], {
      env: { ...process.env, ...testEnv({ HERALD_DURABILITY: 'aof', PORT: '0' }) },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('HERALD_DURABILITY=aof needs WAITAOF');
    expect(run.stderr).not.toMatch(/^\s+at /m);
  });
});

describe('HERALD_REDIS_TIMEOUT_MS on a busy event loop', () => {
  it('an answer Redis gave in time is the answer, though the timer is due when the loop gets to it (before: a 503 for a write that was done)', async () => {
    const app = await buildTestApp({ HERALD_REDIS_TIMEOUT_MS: '100' });
    try {
      await app.redis.ping();
      const answer = app.withRedisTimeout(app.redis.ping());
      await new Promise((resolve) => setImmediate(resolve));
      // The process busy for 300 ms: Redis answers meanwhile, its reply waits in the socket.
      const until = Date.now() + 300;
      while (Date.now() < until) {
        // busy
      }
      expect(await answer).toBe('PONG');
    } finally {
      await disposeTestApp(app);
    }
  });
});
