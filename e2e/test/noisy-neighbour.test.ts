import type { CommandReply, NotificationEvent } from '@herald/protocol';
import { type AppProcess, randomId, redisUrl, waitFor } from '@herald/testing';
import type { Socket } from 'socket.io-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey } from './support/cli.js';
import { gatewayCall, stackEnv, TestApps, TRIO } from './support/stack.js';

// Per-API-key and per-socket/user budgets the flood overruns many times over; the calm tenant's whole
// run (ROUNDS of each request; list and mark-read share the inbox bucket, so 2 × ROUNDS there) fits in
// one burst, so its own limits can never refuse it, however fast or slow the machine is.
const BURST = 20;
const ROUNDS = 10;
const FLOOD_LOOPS = 4;
const FLOOD_ADDRESS = '203.0.113.66';
const CALM_ADDRESS = '198.51.100.1';

type Outcome = { status: number; ms: number };

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

// Gateway, realtime and worker as separate OS processes. One tenant (API key `flood`, and its user's
// socket) floods every limited route and socket event; meanwhile the other tenant does its ordinary
// work and must see every request succeed. Counts are asserted, latencies only printed.
describe('a tenant flooding the gateway and the realtime server does not hurt another tenant', () => {
  const apps = new TestApps();
  let gateway: AppProcess;
  let realtime: AppProcess;
  // Two tenants, each with a key created by `herald keys create`.
  let FLOOD_KEY: string;
  let CALM_KEY: string;

  beforeAll(async () => {
    const env = stackEnv(redisUrl(), {
      HERALD_API_KEYS: 'none',
      // What is measured is interference through limits and slots, not a starved 2-core machine: Redis
      // calls get 5 s before a 503 (default 800 ms), so CPU starvation alone cannot fail the calm tenant.
      HERALD_REDIS_TIMEOUT_MS: '5000',
      // And the limiter's decisions as long (150 ms by default, then a 503 for a flood request too: a
      // starved machine, not the flood, would have failed it).
      HERALD_RATE_LIMIT_TIMEOUT_MS: '5000',
      HERALD_RATE_LIMIT_BURST: '100',
      HERALD_SENDER_RATE_LIMIT_BURST: String(BURST),
      HERALD_SENDER_RATE_LIMIT_PER_SECOND: '5',
      HERALD_TOKEN_RATE_LIMIT_BURST: String(BURST),
      HERALD_TOKEN_RATE_LIMIT_PER_SECOND: '5',
      HERALD_INBOX_RATE_LIMIT_BURST: String(BURST),
      HERALD_INBOX_RATE_LIMIT_PER_SECOND: '5',
      HERALD_SOCKET_EVENTS_BURST: String(BURST),
      HERALD_SOCKET_EVENTS_PER_SECOND: '5',
      HERALD_USER_EVENTS_BURST: String(BURST),
      HERALD_USER_EVENTS_PER_SECOND: '5',
      HERALD_REFUSED_HANDSHAKES_BURST: '5',
      HERALD_REFUSED_HANDSHAKES_PER_SECOND: '1',
      // The tenants' browsers are told apart by X-Forwarded-For, as behind a load balancer.
      HERALD_TRUST_PROXY: 'loopback',
    });
    [FLOOD_KEY, CALM_KEY] = (await Promise.all([createKey(env, 'flood'), createKey(env, 'calm')])).map(
      (created) => created.key,
    ) as [string, string];
    ({ gateway, realtime } = await apps.start(env, TRIO));
  });

  afterAll(() => apps.stop());

  async function call(key: string, method: string, path: string, body?: unknown): Promise<Outcome> {
    const started = performance.now();
    const { status } = await gatewayCall(gateway.url, key, method, path, { body });
    return { status, ms: performance.now() - started };
  }

  async function tokenFor(key: string, userId: string): Promise<Outcome & { token?: string }> {
    const started = performance.now();
    const response = await fetch(`${gateway.url}/tokens`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ userId }),
    });
    const body = (await response.json()) as { token?: string };
    return { status: response.status, ms: performance.now() - started, ...body };
  }

  /** One handshake from `address`: resolves with the socket once connected, or the refusal's code. */
  function handshake(token: string, address: string): Promise<{ socket: Socket; refused?: string }> {
    const socket = apps.socket(realtime.url, {
      auth: { token },
      extraHeaders: { 'x-forwarded-for': address },
    });
    return new Promise((resolve) => {
      socket.once('connect', () => resolve({ socket }));
      socket.once('connect_error', (error: Error & { data?: { code?: string } }) =>
        resolve({ socket, refused: error.data?.code ?? error.message }),
      );
    });
  }

  async function socketFor(key: string, userId: string, address: string): Promise<Socket> {
    const { token } = await tokenFor(key, userId);
    const { socket, refused } = await handshake(token ?? '', address);
    expect(refused).toBeUndefined();
    return socket;
  }

  it('every request of the calm tenant succeeds while the other floods (no 429, no 5xx)', async () => {
    // The same user id in both tenants: two users, whose buckets and slots never meet.
    const floodUser = randomId('alice');
    const calmUser = floodUser;
    const floodSocket = await socketFor(FLOOD_KEY, floodUser, FLOOD_ADDRESS);
    const calmSocket = await socketFor(CALM_KEY, calmUser, CALM_ADDRESS);
    const calmReceived: NotificationEvent[] = [];
    calmSocket.on('notification', (event: NotificationEvent) => calmReceived.push(event));

    // The flood: HTTP loops over every limited route, and a socket that sends events without pause.
    let flooding = true;
    const floodStatuses = new Map<number, number>();
    const floodReplies = new Map<string, number>();
    const count = <K>(map: Map<K, number>, key: K) => map.set(key, (map.get(key) ?? 0) + 1);
    const floodRoutes: [string, string, unknown?][] = [
      ['POST', '/notify', { userId: floodUser, payload: { flood: true } }],
      ['POST', '/tokens', { userId: floodUser }],
      ['GET', `/users/${floodUser}/notifications`],
      ['POST', `/users/${floodUser}/notifications/read`, { all: true }],
    ];
    const httpFlood = Array.from({ length: FLOOD_LOOPS }, async (_, loop) => {
      for (let n = loop; flooding; n++) {
        const [method, path, body] = floodRoutes[n % floodRoutes.length] as [string, string, unknown?];
        count(floodStatuses, (await call(FLOOD_KEY, method, path, body)).status);
      }
    });
    const socketFlood = (async () => {
      while (flooding) {
        const replies = await Promise.all(
          Array.from(
            { length: 8 },
            () => floodSocket.timeout(10_000).emitWithAck('ack', { ids: [] }) as Promise<CommandReply>,
          ),
        );
        for (const reply of replies) count(floodReplies, reply.ok ? 'ok' : reply.code);
      }
    })();

    // And handshakes with forged tokens from the flooding tenant's address.
    const floodHandshakes = new Map<string, number>();
    const handshakeFlood = (async () => {
      while (flooding) {
        const { socket, refused } = await handshake('forged', FLOOD_ADDRESS);
        count(floodHandshakes, refused ?? 'connected');
        socket.close();
      }
    })();

    // Wait until the flood is being refused everywhere, then measure the calm tenant while it goes on.
    await waitFor(
      () =>
        (floodStatuses.get(429) ?? 0) >= FLOOD_LOOPS * 10 &&
        (floodReplies.get('HERALD_ERR_RATE_LIMITED') ?? 0) >= 10 &&
        (floodHandshakes.get('HERALD_ERR_RATE_LIMITED') ?? 0) >= 5,
      { timeoutMs: 30_000, what: 'the flood refused' },
    );
    const calm: Record<string, Outcome[]> = { notify: [], tokens: [], list: [], read: [], handshake: [] };
    const calmAcks: CommandReply[] = [];
    const ackMs: number[] = [];
    const sent: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const started = performance.now();
      const notified = await fetch(`${gateway.url}/notify`, {
        method: 'POST',
        headers: { authorization: `Bearer ${CALM_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ userId: calmUser, payload: { round } }),
      });
      calm.notify?.push({ status: notified.status, ms: performance.now() - started });
      if (notified.status === 202) sent.push(((await notified.json()) as { id: string }).id);
      const minted = await tokenFor(CALM_KEY, calmUser);
      calm.tokens?.push(minted);
      // A new tab of the calm user: a fresh handshake with the token just minted.
      const handshakeStarted = performance.now();
      const tab = await handshake(minted.token ?? '', CALM_ADDRESS);
      calm.handshake?.push({ status: tab.refused ? 403 : 200, ms: performance.now() - handshakeStarted });
      tab.socket.close();
      calm.list?.push(await call(CALM_KEY, 'GET', `/users/${calmUser}/notifications`));
      calm.read?.push(await call(CALM_KEY, 'POST', `/users/${calmUser}/notifications/read`, { all: true }));
      const ackStarted = performance.now();
      calmAcks.push(await calmSocket.timeout(10_000).emitWithAck('ack', { ids: sent.slice(-1) }));
      ackMs.push(performance.now() - ackStarted);
    }
    // Every calm notification reaches its user's socket, the flood still running.
    await waitFor(() => sent.every((id) => calmReceived.some((event) => event.id === id)), {
      timeoutMs: 30_000,
      what: 'the calm tenant’s notifications delivered',
    });
    flooding = false;
    await Promise.all([...httpFlood, socketFlood, handshakeFlood]);

    const rows = Object.entries(calm).map(([route, outcomes]) => ({
      route,
      requests: outcomes.length,
      ok: outcomes.filter((o) => o.status < 300).length,
      refused: outcomes
        .filter((o) => o.status >= 300)
        .map((o) => o.status)
        .join(' '),
      p50ms: percentile(
        outcomes.map((o) => o.ms),
        50,
      ).toFixed(1),
      p99ms: percentile(
        outcomes.map((o) => o.ms),
        99,
      ).toFixed(1),
    }));
    rows.push({
      route: 'socket ack',
      requests: calmAcks.length,
      ok: calmAcks.filter((reply) => reply.ok).length,
      refused: calmAcks.flatMap((reply) => (reply.ok ? [] : [reply.code])).join(' '),
      p50ms: percentile(ackMs, 50).toFixed(1),
      p99ms: percentile(ackMs, 99).toFixed(1),
    });
    console.table(rows);
    console.log(
      'flood HTTP statuses',
      Object.fromEntries(floodStatuses),
      'flood socket replies',
      Object.fromEntries(floodReplies),
      'flood handshakes',
      Object.fromEntries(floodHandshakes),
    );

    // The flood was refused (and never with a 5xx) …
    expect(floodStatuses.get(429)).toBeGreaterThan(0);
    expect([...floodStatuses.keys()].filter((status) => status >= 500)).toEqual([]);
    expect(floodReplies.get('HERALD_ERR_RATE_LIMITED')).toBeGreaterThan(0);
    expect(floodHandshakes.get('HERALD_ERR_RATE_LIMITED')).toBeGreaterThan(0);
    expect(floodHandshakes.get('connected')).toBeUndefined();
    // … and the other tenant lost nothing: every request and every event succeeded.
    for (const row of rows) expect(row, row.route).toMatchObject({ requests: ROUNDS, ok: ROUNDS });
    expect(calmReceived.filter((event) => sent.includes(event.id))).toHaveLength(ROUNDS);
  });
});
