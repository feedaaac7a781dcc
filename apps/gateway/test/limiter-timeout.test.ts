import { type RedisServerHandle, startRedisServer, waitFor } from '@herald/testing';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { auth, buildTestApp, disposeTestApp, testEnv } from './helpers.js';

// A Redis that is up but slow (frozen for a moment, as a saturated one answers late): the limiter's
// decision waits HERALD_RATE_LIMIT_TIMEOUT_MS for it, then HERALD_RATE_LIMIT_FAILURE decides.
describe('HERALD_RATE_LIMIT_TIMEOUT_MS: how long a limiter decision may wait for Redis', () => {
  let redis: RedisServerHandle;
  let strict: FastifyInstance;
  let patient: FastifyInstance;

  beforeAll(async () => {
    redis = await startRedisServer();
    const env = { REDIS_URL: redis.url, HERALD_RATE_LIMIT_BURST: '1000', HERALD_REDIS_TIMEOUT_MS: '5000' };
    strict = await buildTestApp(env);
    patient = await buildTestApp({ ...env, HERALD_RATE_LIMIT_TIMEOUT_MS: '3000' });
  });
  afterAll(async () => {
    redis.process.kill('SIGCONT');
    await Promise.all([strict, patient].map((app) => app && disposeTestApp(app).catch(() => {})));
    await redis.dispose();
  });

  const notify = (app: FastifyInstance, userId: string) =>
    app.inject({ method: 'POST', url: '/notify', headers: auth, payload: { userId, payload: {} } });

  it('a decision slower than the default 150 ms is a 503 that accepted nothing; a larger timeout waits and accepts', async () => {
    // Both gateways have their API key cached and their limiter scripts loaded.
    expect((await notify(strict, 'warm')).statusCode).toBe(202);
    expect((await notify(patient, 'warm')).statusCode).toBe(202);

    // Redis stops answering for 600 ms: longer than 150 ms, well within 3 s.
    redis.process.kill('SIGSTOP');
    const resume = setTimeout(() => redis.process.kill('SIGCONT'), 600);
    const [late, waited] = await Promise.all([
      notify(strict, 'slow-strict'),
      notify(patient, 'slow-patient'),
    ]);
    clearTimeout(resume);
    redis.process.kill('SIGCONT');

    expect(late.statusCode, late.body).toBe(503);
    expect(late.json()).toMatchObject({
      code: 'HERALD_ERR_UNAVAILABLE',
      error: 'Rate limiter unavailable; nothing was accepted. Retry later.',
    });
    expect(waited.statusCode, waited.body).toBe(202);
    const id = waited.json<{ id: string }>().id;
    await waitFor(async () => (await patient.queue.getJob(id)) !== undefined, {
      timeoutMs: 10_000,
      what: 'the job of the 202',
    });
    // The 503 accepted nothing: the strict gateway's queue holds only its warm-up notification.
    const jobs = await strict.queue.getJobs(['waiting', 'delayed', 'prioritized', 'active']);
    expect(jobs.map((job) => job.data.userId)).toEqual(['warm']);
  });

  it('local: a refusal by the gateway’s own share of the bucket is a 429 naming the policy, not a 503 "unavailable" (the limiter did decide)', async () => {
    const local = await buildTestApp({
      REDIS_URL: redis.url,
      HERALD_REDIS_TIMEOUT_MS: '5000',
      HERALD_RATE_LIMIT_FAILURE: 'local',
      HERALD_EXPECTED_GATEWAYS: '2',
      HERALD_RATE_LIMIT_BURST: '4',
      HERALD_RATE_LIMIT_PER_SECOND: '0.01',
    });
    try {
      expect((await notify(local, 'warm')).statusCode).toBe(202);
      redis.process.kill('SIGSTOP');
      const resume = setTimeout(() => redis.process.kill('SIGCONT'), 600);
      // This gateway's share of the recipient's 4: 2.
      const answers = await Promise.all(Array.from({ length: 4 }, () => notify(local, 'local-user')));
      clearTimeout(resume);
      redis.process.kill('SIGCONT');
      expect(answers.map((answer) => answer.statusCode).sort()).toEqual([202, 202, 429, 429]);
      for (const answer of answers.filter((answer) => answer.statusCode === 429)) {
        expect(answer.json()).toMatchObject({ code: 'HERALD_ERR_RATE_LIMITED', policy: 'recipient' });
        expect(Number(answer.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      }
    } finally {
      redis.process.kill('SIGCONT');
      await disposeTestApp(local);
    }
  });

  it('is at most HERALD_REDIS_TIMEOUT_MS, and says so', () => {
    expect(() => loadConfig(testEnv({ HERALD_RATE_LIMIT_TIMEOUT_MS: '900' }))).toThrow(
      'HERALD_RATE_LIMIT_TIMEOUT_MS (900) must be at most HERALD_REDIS_TIMEOUT_MS (800)',
    );
    expect(loadConfig(testEnv({ HERALD_RATE_LIMIT_TIMEOUT_MS: '800' })).rateLimit.timeoutMs).toBe(800);
    expect(loadConfig(testEnv()).rateLimit.timeoutMs).toBe(150);
    // Unset under a shorter Redis timeout: that timeout (a configuration that started before still does).
    expect(loadConfig(testEnv({ HERALD_REDIS_TIMEOUT_MS: '100' })).rateLimit.timeoutMs).toBe(100);
    expect(() => loadConfig(testEnv({ HERALD_RATE_LIMIT_TIMEOUT_MS: '5' }))).toThrow(
      'HERALD_RATE_LIMIT_TIMEOUT_MS must be >= 10',
    );
  });
});
