import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NOTIFY_JOB_NAME } from '@herald/protocol';
import { randomId, startApp, waitFor } from '@herald/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { API_KEY, partitionQueues, testEnv } from './helpers.js';

const entry = fileURLToPath(new URL('../dist/server.js', import.meta.url));

describe('graceful shutdown', () => {
  const env = testEnv({ HERALD_RATE_LIMIT_BURST: '100000', HERALD_SENDER_RATE_LIMIT_BURST: '100000' });
  const queues = partitionQueues(env);
  afterAll(async () => {
    await Promise.all(queues.map((queue) => queue.obliterate({ force: true })));
    await Promise.all(queues.map((queue) => queue.close()));
  });

  it('SIGTERM during a stream of requests: every 202 has its job, the rest are refused, exit 0 within 10 s', async () => {
    const gateway = await startApp({ name: 'gateway', entry, env });
    const accepted: string[] = [];
    const refused: string[] = [];
    let stopping = false;

    // 8 clients post back to back until the gateway stops answering.
    const client = async () => {
      for (;;) {
        try {
          const response = await fetch(`${gateway.url}/notify`, {
            method: 'POST',
            headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
            body: JSON.stringify({ userId: randomId('u'), payload: { n: 1 } }),
          });
          const body = (await response.json()) as { id?: string; code?: string };
          if (response.status === 202 && body.id) accepted.push(body.id);
          else if (response.status === 503)
            refused.push(`503 ${body.code} retry-after ${response.headers.get('retry-after') ?? 'none'}`);
          else throw new Error(`unexpected ${response.status} ${JSON.stringify(body)}`);
        } catch (error) {
          if (!stopping) throw error;
          // Connection refused or reset once the server closed: the request was not accepted.
          refused.push(String((error as Error).cause ?? error));
          return;
        }
      }
    };
    const clients = Array.from({ length: 8 }, client);
    await waitFor(() => accepted.length >= 200, { timeoutMs: 30_000, what: '200 accepted notifications' });

    stopping = true;
    const started = Date.now();
    const exitCode = await gateway.stop('SIGTERM', 15_000);
    const tookMs = Date.now() - started;
    await Promise.all(clients);

    expect(exitCode).toBe(0);
    expect(tookMs).toBeLessThan(10_000);
    expect(refused.length).toBeGreaterThan(0);
    // A request that reached the closing gateway is refused in Herald's own terms (not Fastify's
    // `{ statusCode, error, message }`): retry elsewhere, nothing was accepted.
    const answered = refused.filter((outcome) => outcome.startsWith('503'));
    expect(
      answered.filter((outcome) => !/^503 HERALD_ERR_UNAVAILABLE retry-after \d+$/.test(outcome)),
    ).toEqual([]);
    // Nothing answered 202 is lost.
    const jobs = await Promise.all(
      accepted.map(async (id) => (await Promise.all(queues.map((queue) => queue.getJob(id)))).find(Boolean)),
    );
    const missing = accepted.filter((_, index) => jobs[index]?.name !== NOTIFY_JOB_NAME);
    expect(missing).toEqual([]);
    // One line per request at info, when it completes: its request id, method and URL, status, time and,
    // for a 202, the notification ids (no separate "incoming request" or "queued" lines).
    const completed = gateway.lines.filter((line) => line.includes('"msg":"request completed"'));
    const queuedLines = completed.filter((line) => line.includes('"statusCode":202'));
    expect(queuedLines.length).toBeGreaterThan(0);
    expect(queuedLines.every((line) => /"reqId":"[^"]+"/.test(line))).toBe(true);
    expect(queuedLines.every((line) => /"method":"POST","url":"\/notify"/.test(line))).toBe(true);
    const logged = new Set(
      queuedLines.flatMap(
        (line) => (JSON.parse(line) as { notificationIds?: string[] }).notificationIds ?? [],
      ),
    );
    expect(accepted.filter((id) => !logged.has(id))).toEqual([]);
    expect(gateway.lines.filter((line) => /"msg":"(incoming request|queued)"/.test(line))).toEqual([]);
    expect(gateway.lines.some((line) => line.includes('"msg":"shutting down"'))).toBe(true);
  });

  it('SIGTERM with an admin stream open: the stream is ended, the gateway exits 0 (an SSE answer never holds it)', async () => {
    const adminKey = 'admin-key-0123456789abcdef0123456789abcdef';
    const gateway = await startApp({ name: 'gateway', entry, env: { ...env, HERALD_ADMIN_KEY: adminKey } });
    const response = await fetch(`${gateway.url}/admin/stream`, {
      headers: { authorization: `Bearer ${adminKey}` },
    });
    expect(response.status).toBe(200);
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    expect((await reader.read()).done).toBe(false);
    const [exitCode] = await Promise.all([
      gateway.stop('SIGTERM', 15_000),
      // Read until the server ends the stream.
      (async () => {
        while (!(await reader.read().catch(() => ({ done: true }))).done);
      })(),
    ]);
    // closeWithGrace exits 1 when the grace period runs out: 0 means every connection closed in time.
    expect(exitCode).toBe(0);
  });

  it.each([
    { flags: '--heapsnapshot-signal=SIGUSR2', file: '.heapsnapshot' },
    { flags: '--report-on-signal', file: '.json' },
  ])(
    'SIGUSR2 with $flags (Node handles it): the file is written and the gateway keeps serving',
    async ({ flags, file }) => {
      const dir = await mkdtemp(join(tmpdir(), 'herald-diag-'));
      try {
        const gateway = await startApp({
          name: 'gateway',
          entry,
          env: { ...env, NODE_OPTIONS: `${flags} --diagnostic-dir=${dir} --report-directory=${dir}` },
        });
        try {
          gateway.process.kill('SIGUSR2');
          await waitFor(async () => (await readdir(dir)).some((name) => name.endsWith(file)), {
            timeoutMs: 30_000,
            what: `a ${file} file`,
          });
          const response = await fetch(`${gateway.url}/healthz`);
          expect(response.status).toBe(200);
          expect(gateway.process.exitCode).toBeNull();
          expect(gateway.lines.some((line) => line.includes('"msg":"shutting down"'))).toBe(false);
        } finally {
          expect(await gateway.stop('SIGTERM', 15_000)).toBe(0);
        }
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
  );
});
