import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { NOTIFY_JOB_NAME, type NotificationJob, notificationJobOptions } from '@herald/protocol';
import {
  appOnOwnRedis,
  expectHealthThroughOutage,
  freePort,
  randomId,
  scrapeMetrics,
  startRedisServer,
  waitFor,
} from '@herald/testing';
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const entry = fileURLToPath(new URL('../dist/server.js', import.meta.url));

describe('worker liveness, readiness and metrics (a real process on a Redis of its own)', () => {
  const queueName = randomId('queue');
  // startApp sets PORT=0: the worker's operations server takes a free port and logs it.
  const own = appOnOwnRedis('worker', entry, (url) => ({ REDIS_URL: url, HERALD_QUEUE_NAME: queueName }));
  let queue: Queue<NotificationJob>;

  beforeAll(() => {
    queue = new Queue(queueName, { prefix: '{herald}', connection: { url: own.redis.url } });
  });
  afterAll(async () => {
    await queue?.close();
  });

  it('logs its port and counts processed jobs by outcome, their duration and the queue depth', async () => {
    const worker = own.app;
    expect(worker.port).toBeGreaterThan(0);
    const job: NotificationJob = {
      id: randomUUID(),
      userId: 'u1',
      payload: { n: 1 },
      createdAt: new Date().toISOString(),
    };
    await queue.add(NOTIFY_JOB_NAME, job, notificationJobOptions(job));
    const families = await waitFor(
      async () => {
        const scraped = await scrapeMetrics(`${worker.url}/metrics`);
        const appended = scraped
          .get('herald_worker_jobs_total')
          ?.metrics.find((m) => m.labels?.outcome === 'appended');
        return appended?.value === '1' ? scraped : undefined;
      },
      { timeoutMs: 20_000, what: 'herald_worker_jobs_total{outcome="appended"} 1' },
    );
    expect(families.get('herald_worker_job_duration_seconds')?.metrics[0]?.count).toBe('1');
    expect(families.get('herald_queue_jobs')?.type).toBe('GAUGE');
    expect(families.get('herald_queue_stalled_seconds')?.metrics).toEqual([
      expect.objectContaining({ labels: { queue: `{herald}:${queueName}` }, value: '0' }),
    ]);
    expect(families.has('herald_worker_process_cpu_seconds_total')).toBe(true);
  });

  it('while Redis is frozen (SIGSTOP) /metrics still answers, with the last known queue depth; /readyz 503', async () => {
    const scrape = async () => {
      const response = await fetch(`${own.app.url}/metrics`, { signal: AbortSignal.timeout(8000) });
      expect(response.status).toBe(200);
      return response.text();
    };
    expect(await scrape()).toMatch(/^herald_queue_jobs\{state="waiting"\} \d+$/m); // a known depth
    // A frozen Redis keeps its connections open and answers nothing: a read without a bound waits for it.
    own.redis.process.kill('SIGSTOP');
    try {
      const text = await scrape();
      expect(text).toMatch(/^herald_queue_jobs\{state="waiting"\} \d+$/m);
      expect(text).toContain('herald_worker_jobs_total');
      expect((await fetch(`${own.app.url}/readyz`, { signal: AbortSignal.timeout(8000) })).status).toBe(503);
    } finally {
      own.redis.process.kill('SIGCONT');
    }
    await waitFor(async () => (await fetch(`${own.app.url}/readyz`)).status === 200, { what: 'ready again' });
  });

  it('/healthz stays 200 while Redis is down; /readyz answers 503 JSON then, 200 once Redis is back', async () => {
    await expectHealthThroughOutage(own.app.url, own.redis, {
      metric: 'herald_worker_jobs_total',
      whileDown: async () => {
        const unknown = await fetch(`${own.app.url}/nope`);
        expect(unknown.status).toBe(404);
        expect(await unknown.json()).toMatchObject({ code: 'HERALD_ERR_NOT_FOUND' });
      },
    });
  });
});

describe('a worker started while Redis is down', () => {
  it('answers /healthz 200 and /readyz 503 while it waits, and starts once Redis is there', async () => {
    const redis = await startRedisServer();
    await redis.stop();
    const port = await freePort();
    const lines: string[] = [];
    const child = spawn(process.execPath, [entry], {
      env: { ...process.env, PORT: String(port), REDIS_URL: redis.url, HERALD_QUEUE_NAME: randomId('queue') },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.on('data', (chunk: Buffer) => lines.push(chunk.toString()));
    const exited = new Promise((resolve) => child.once('exit', resolve));
    try {
      const url = `http://127.0.0.1:${port}`;
      await waitFor(async () => (await fetch(`${url}/healthz`).catch(() => undefined))?.status === 200, {
        timeoutMs: 20_000,
        what: '/healthz while Redis is down',
      });
      expect((await fetch(`${url}/readyz`)).status).toBe(503);
      expect(lines.join('')).not.toContain('"msg":"listening"');

      await redis.restart();
      await waitFor(() => lines.join('').includes('"msg":"listening"'), {
        timeoutMs: 30_000,
        what: 'the worker to start once Redis is there',
      });
      await waitFor(async () => (await fetch(`${url}/readyz`)).status === 200, { what: '/readyz 200' });
    } finally {
      child.kill('SIGTERM');
      await exited;
      await redis.dispose();
    }
  });
});

describe('a worker that cannot start, or is stopped before it has', () => {
  /** The worker as a process on `port` with Redis at `redisUrl`; its log lines and its exit. */
  function spawnWorker(port: number, redisUrl: string) {
    const lines: string[] = [];
    const child = spawn(process.execPath, [entry], {
      env: { ...process.env, PORT: String(port), REDIS_URL: redisUrl, HERALD_QUEUE_NAME: randomId('queue') },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.on('data', (chunk: Buffer) => lines.push(chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => lines.push(chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    return { child, lines, exited };
  }

  it('SIGTERM while it waits for Redis: shuts down as on any SIGTERM, exit 0', async () => {
    const redis = await startRedisServer();
    await redis.stop();
    const port = await freePort();
    const worker = spawnWorker(port, redis.url);
    try {
      await waitFor(
        async () => (await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => undefined))?.ok,
        {
          timeoutMs: 20_000,
          what: '/healthz while Redis is down',
        },
      );
      worker.child.kill('SIGTERM');
      expect(await worker.exited).toBe(0);
      expect(worker.lines.join('')).toContain('"msg":"shutting down"');
    } finally {
      worker.child.kill('SIGKILL');
      await redis.dispose();
    }
  });

  it('a port already taken: exits 1 with one JSON log line naming it (never a bare stack trace)', async () => {
    const redis = await startRedisServer();
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '0.0.0.0', resolve));
    const port = (taken.address() as AddressInfo).port;
    const worker = spawnWorker(port, redis.url);
    try {
      expect(await worker.exited).toBe(1);
      const output = worker.lines.join('');
      const fatal = output
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as { level: number; msg: string; err?: { message: string } })
        .find((entry) => entry.level >= 50);
      expect(fatal?.err?.message, output).toContain(`EADDRINUSE: address already in use 0.0.0.0:${port}`);
      // In words, naming the setting to change.
      expect(fatal?.err?.message, output).toMatch(new RegExp(`^PORT=${port} is taken on 0\\.0\\.0\\.0`));
      expect(output).not.toMatch(/^\s+at /m);
    } finally {
      worker.child.kill('SIGKILL');
      taken.close();
      await redis.dispose();
    }
  });
});
