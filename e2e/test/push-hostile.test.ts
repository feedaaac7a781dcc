import { createECDH, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { EscalationStatus } from '@herald/protocol';
import { escalationQueueName, PushSubscriptions } from '@herald/push';
import {
  type AppProcess,
  deleteMatching,
  loopbackCertificate,
  queueConnection,
  redisUrl,
  testRedis,
  waitFor,
} from '@herald/testing';
import { Queue } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey } from './support/cli.js';
import { API_KEY, gatewayCall, stackEnv, startApps } from './support/stack.js';

/**
 * A push endpoint is a URL that anyone holding a user token chooses, so the worker must survive one that
 * answers as no push service would: an endless body, or an answer that never ends. A stand-in push
 * service in this process (HTTPS on loopback) does both; the gateway and the worker are processes.
 */
describe('Web Push: a hostile push endpoint costs the worker one bounded request', () => {
  const dir = mkdtempSync(join(tmpdir(), 'herald-push-hostile-'));
  const { cert, key } = loopbackCertificate(dir);
  const vapid = createECDH('prime256v1');
  vapid.generateKeys();
  const env = stackEnv(redisUrl(), {
    HERALD_VAPID_PUBLIC_KEY: vapid.getPublicKey('base64url'),
    HERALD_VAPID_PRIVATE_KEY: vapid.getPrivateKey('base64url'),
    HERALD_VAPID_SUBJECT: 'mailto:ops@example.com',
    HERALD_PUSH_ALLOW_PRIVATE: 'true',
    HERALD_PUSH_TIMEOUT_MS: '1000',
    NODE_EXTRA_CA_CERTS: cert,
  });
  const processes: AppProcess[] = [];
  let apps: Record<'gateway' | 'worker', AppProcess>;
  let redis: Redis | Cluster;
  let server: Server;
  /** Each request the stand-in took, by path: bytes written, and whether the connection is closed. */
  const seen = new Map<string, { written: number; closed: boolean }[]>();
  const closed = (path: string) => (seen.get(path) ?? []).some((record) => record.closed);

  beforeAll(async () => {
    redis = testRedis();
    server = createServer({ cert: readFileSync(cert), key: readFileSync(key) }, (request, response) => {
      request.resume();
      const record = { written: 0, closed: false };
      seen.set(request.url ?? '', [...(seen.get(request.url ?? '') ?? []), record]);
      response.on('close', () => {
        record.closed = true;
      });
      if (request.url?.startsWith('/hang')) return; // never answers: cut at HERALD_PUSH_TIMEOUT_MS
      if (request.url === '/ok') {
        response.writeHead(201).end();
        return;
      }
      if (request.url === '/flood') {
        // 201 and then 1 MiB after 1 MiB for as long as the worker reads (web-push kept it all in one string).
        response.writeHead(201);
        const chunk = Buffer.alloc(1 << 20, 'x');
        const pump = () => {
          while (!record.closed && record.written < 4096 * (1 << 20)) {
            record.written += chunk.length;
            if (!response.write(chunk)) return void response.once('drain', pump);
          }
          response.end();
        };
        pump();
      } else {
        // 500 and then a byte every 100 ms, for ever: never silent long enough for an idle timeout.
        response.writeHead(500);
        const timer = setInterval(() => {
          record.written += 1;
          response.write('x');
        }, 100);
        response.on('close', () => clearInterval(timer));
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    apps = await startApps(env, { gateway: 'gateway', worker: 'worker' }, processes);
  });

  afterAll(async () => {
    await Promise.all(processes.map((process) => process.stop()));
    server.closeAllConnections();
    server.close();
    for (const name of [env.HERALD_QUEUE_NAME ?? '', escalationQueueName(env.HERALD_QUEUE_NAME ?? '')]) {
      const queue = new Queue(name, { prefix: '{herald}', connection: queueConnection() });
      await queue.obliterate({ force: true }).catch(() => {});
      await queue.close();
    }
    for (const prefix of [env.HERALD_KEY_PREFIX, env.HERALD_INBOX_PREFIX, env.HERALD_RATE_LIMIT_PREFIX]) {
      await deleteMatching(redis, `${prefix}*`);
    }
    redis.disconnect();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Registers `path` of the stand-in as `userId`'s one browser and sends them a notification that escalates. */
  async function escalateTo(
    userId: string,
    path: string,
    tenant = { id: 'default', key: API_KEY },
  ): Promise<string> {
    const browser = createECDH('prime256v1');
    browser.generateKeys();
    await new PushSubscriptions(redis, env.HERALD_INBOX_PREFIX ?? '').add(tenant.id, userId, {
      endpoint: `https://127.0.0.1:${(server.address() as { port: number }).port}${path}`,
      expirationTime: null,
      keys: { p256dh: browser.getPublicKey('base64url'), auth: randomBytes(16).toString('base64url') },
    });
    const answer = await gatewayCall(apps.gateway.url, tenant.key, 'POST', '/notify', {
      body: { userId, payload: { title: 'hello' }, escalateAfterMs: 1000 },
    });
    expect(answer.status).toBe(202);
    return answer.body.id as string;
  }

  it('an endless answer body is not read to the end: the push counts as sent and the worker lives on', async () => {
    const id = await escalateTo('flooded', '/flood');
    let escalation: EscalationStatus | undefined;
    await waitFor(
      async () => {
        const answer = await gatewayCall(apps.gateway.url, API_KEY, 'GET', `/notifications/${id}`);
        escalation = answer.body.escalation as EscalationStatus | undefined;
        return escalation?.state === 'pushed';
      },
      { timeoutMs: 15_000, what: 'the escalation pushed' },
    );
    expect(escalation).toMatchObject({ state: 'pushed', sent: 1, failed: 0 });
    expect(closed('/flood')).toBe(true);
    expect(apps.worker.process.exitCode).toBeNull();
    expect((await fetch(`${apps.worker.url}/healthz`)).status).toBe(200);
  });

  it('an answer that never ends is cut at HERALD_PUSH_TIMEOUT_MS and retried, though bytes keep coming', async () => {
    await escalateTo('trickled', '/trickle');
    await waitFor(() => seen.has('/trickle'), { timeoutMs: 10_000, what: 'the push arrived' });
    // The worker gives up on it (and closes the connection) about 1 s after it began.
    await waitFor(() => closed('/trickle'), {
      timeoutMs: 8_000,
      what: 'the worker closed the never-ending answer',
    });
    const metrics = await (await fetch(`${apps.worker.url}/metrics`)).text();
    expect(metrics).toMatch(/herald_worker_pushes_total\{outcome="retry"\} [1-9]/);
  });

  it("one tenant's push services that never answer hold a few of the worker's slots, not all: another tenant's escalation goes out meanwhile", async () => {
    const other = await createKey(env, 'push-other');
    // 30 escalations of one tenant to a push service that never answers (each cut at 1 s, then retried).
    const hung = await Promise.all(
      Array.from({ length: 30 }, (_, i) => escalateTo(`hang-${i}-${Date.now()}`, `/hang/${i}`)),
    );
    expect(hung).toHaveLength(30);
    await escalateTo(`ok-${Date.now()}`, '/ok', { id: 'push-other', key: other.key });
    await waitFor(() => (seen.get('/ok') ?? []).length > 0, {
      timeoutMs: 30_000,
      what: "the other tenant's push",
    });
    // When it went out, the hung tenant had taken a few slots, never the worker's 20.
    const hangsBefore = [...seen.keys()].filter((path) => path.startsWith('/hang/')).length;
    expect(hangsBefore).toBeLessThan(20);
  });
});
