import { randomBytes } from 'node:crypto';
import { randomId, waitFor } from '@herald/testing';
import { io, type Socket } from 'socket.io-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ComposeDryRun } from './support/dry-run.js';

// `docker compose up` without Docker: each service of docker-compose.yml as a local process with the
// service's environment, behind the real nginx with infra/nginx/herald.conf; then the README's first-run
// steps, through the balancer's one origin.
describe('compose dry run (docker-compose.yml as local processes, nginx in front)', () => {
  // What the README's first run puts in .env.
  const env = {
    HERALD_JWT_SECRET: randomBytes(32).toString('base64'),
    HERALD_API_KEYS: 'none',
    REDIS_PASSWORD: randomBytes(32).toString('hex'),
    HERALD_ADMIN_KEY: randomBytes(32).toString('base64'),
  };
  const stack = new ComposeDryRun(env);
  const sockets: Socket[] = [];
  let lb: string;
  let apiKey: string;

  beforeAll(async () => {
    await stack.start();
    lb = stack.url('lb');
  }, 300_000);
  afterAll(async () => {
    for (const socket of sockets) socket.disconnect();
    await stack.stop();
  }, 60_000);

  it('starts every service, each healthy by its own healthcheck, in depends_on order', () => {
    expect([...stack.instances.keys()].sort()).toEqual(
      ['gateway', 'lb', 'realtime-1', 'realtime-2', 'redis', 'web', 'worker'].sort(),
    );
    expect(stack.instances.get('worker')).toHaveLength(2);
  });

  it('first run: `docker compose run --rm herald keys create` prints a key the gateway accepts', async () => {
    const created = await stack.run('herald', ['keys', 'create', '--name', 'shop', '--tenant', 'acme']);
    expect(created.code, created.stderr).toBe(0);
    apiKey = /^key:\s+(\S+)$/m.exec(created.stdout)?.[1] as string;
    expect(apiKey).toBeTruthy();
  });

  it('serves the inbox page and the element at / through the balancer', async () => {
    const page = await fetch(`${lb}/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/text\/html/);
    expect(await page.text()).toContain('herald-inbox');
    const element = await fetch(`${lb}/element/herald-inbox.js`);
    expect(element.status).toBe(200);
  });

  it('serves the operator dashboard and, with HERALD_ADMIN_KEY, the admin API on the same origin', async () => {
    expect((await fetch(`${lb}/dashboard`)).status).toBe(200);
    const refused = await fetch(`${lb}/api/admin/snapshot`);
    expect(refused.status).toBe(401);
    const snapshot = await fetch(`${lb}/api/admin/snapshot`, {
      headers: { authorization: `Bearer ${env.HERALD_ADMIN_KEY}` },
    });
    expect(snapshot.status).toBe(200);
  });

  it('does not publish the gateway’s /metrics (every tenant’s traffic together): Prometheus scrapes the app itself', async () => {
    for (const path of [
      '/api/metrics',
      '/api//metrics',
      '/api/metrics/',
      '/api/metrics?x=1',
      '/api/%6Detrics',
    ]) {
      const response = await fetch(`${lb}${path}`);
      expect(response.status, path).toBe(404);
      expect(await response.text(), path).not.toContain('herald_');
    }
    const scraped = await fetch(`${stack.url('gateway')}/metrics`);
    expect(scraped.status).toBe(200);
    expect(await scraped.text()).toContain('herald_http_requests_total');
  });

  it('POST /api/notify through the balancer reaches a socket connected through its /socket.io', async () => {
    const userId = randomId('u');
    const tokenResponse = await fetch(`${lb}/api/tokens`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ userId }),
    });
    expect(tokenResponse.status).toBe(200);
    const { token } = (await tokenResponse.json()) as { token: string };

    const received: { id: string }[] = [];
    // Four sockets for one user: the balancer's least_conn spreads them over both realtime servers,
    // and each one must get the notification whichever server holds it.
    for (let i = 0; i < 4; i++) {
      const socket = io(lb, {
        auth: { token },
        transports: ['websocket'],
        reconnection: false,
        forceNew: true,
      });
      sockets.push(socket);
      socket.on('notification', (event: { id: string }) => received.push(event));
      await new Promise<void>((resolve, reject) => {
        socket.once('connect', resolve);
        socket.once('connect_error', reject);
      });
    }
    for (const name of ['realtime-1', 'realtime-2']) {
      await waitFor(
        async () =>
          ((await (await fetch(`${stack.url(name)}/healthz`)).json()) as { connections: number })
            .connections > 0,
        { what: `${name} holds some of the sockets` },
      );
    }

    const sent = await fetch(`${lb}/api/notify`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ userId, payload: { title: 'Hello', body: 'through the balancer' } }),
    });
    expect(sent.status).toBe(202);
    const { id } = (await sent.json()) as { id: string };
    await waitFor(() => received.filter((event) => event.id === id).length === 4, {
      timeoutMs: 20_000,
      what: 'the notification on all four sockets',
    });
  });

  it('stops every app on SIGTERM within the grace, exit code 0 (what `docker compose down` sends)', async () => {
    for (const socket of sockets) socket.disconnect();
    const codes = await stack.stop();
    expect([...codes.keys()].sort()).toEqual([
      'gateway-1',
      'realtime-1-1',
      'realtime-2-1',
      'web-1',
      'worker-1',
      'worker-2',
    ]);
    for (const [name, code] of codes) expect({ name, code }).toEqual({ name, code: 0 });
  }, 60_000);
});
