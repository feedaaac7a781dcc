// End-to-end delivery benchmark: POST /notify → gateway → BullMQ → worker (inbox append + pub/sub) →
// two realtime instances → socket.io-client, with 1,000 connected users. The peer, in the same run, with
// the same number of users on two bare Socket.IO servers (`@socket.io/redis-adapter`, each its own
// process): a bare @socket.io/redis-emitter publish to the user's room (no HTTP, no queue, no inbox:
// Socket.IO's at-most-once floor through Redis). Then memory per idle
// connection at 5,000 connections, against a bare Socket.IO server. Loopback only, its own redis-server.
//
// Usage: pnpm --filter @herald/bench delivery   (after `pnpm build`)
// Env:   BENCH_SECONDS (per rate, default 10), BENCH_HOLD_SECONDS (default 30), BENCH_USERS (1000),
//        BENCH_IDLE (5000), BENCH_RATES (500,1000,2000).
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { createRequire } from 'node:module';
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import {
  DEFAULT_QUEUE_NAME,
  DEFAULT_QUEUE_PREFIX,
  NOTIFY_JOB_NAME,
  type NotificationJob,
  notificationJobOptions,
  signUserToken,
} from '@herald/protocol';
import { type AppProcess, freePort, startApp, startRedisServer, waitFor } from '@herald/testing';
import { Emitter } from '@socket.io/redis-emitter';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { io, type Socket } from 'socket.io-client';
import { barChart, writeReport } from '../report.js';

const require = createRequire(import.meta.url);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const HOLD_SECONDS = Number(process.env.BENCH_HOLD_SECONDS ?? 30);
const USERS = Number(process.env.BENCH_USERS ?? 1000);
const IDLE = Number(process.env.BENCH_IDLE ?? 5000);
const RATES = (process.env.BENCH_RATES ?? '500,1000,2000').split(',').map(Number);
const WARMUP_MS = 1000;
// 32+ bytes each, as the apps require outside development mode.
const SECRET = 'bench-secret-0123456789abcdef0123456789';
const API_KEY = 'bench-key-0123456789abcdef0123456789abcdef';
const PUBSUB = 'bench-pubsub';

const now = () => performance.timeOrigin + performance.now();

interface Sample {
  /** CPU used during the send window, % of one core: gateway / worker / realtime A+B / Redis / this process. */
  cpu?: string;
  latencies: number[];
  sent: number;
  accepted: number;
  refused: number;
  received: number;
}

async function main(): Promise<void> {
  const started = Date.now();
  const redis = await startRedisServer({ args: ['--appendonly', 'no'] });
  const processes: (AppProcess | { stop(): Promise<unknown> })[] = [];
  const env = {
    REDIS_URL: redis.url,
    HERALD_API_KEYS: API_KEY,
    HERALD_JWT_SECRET: SECRET,
    HERALD_PUBSUB_KEY: PUBSUB,
    // The benchmark measures delivery, not the limiter: limits far above the offered load.
    HERALD_RATE_LIMIT_PER_SECOND: '100000',
    HERALD_RATE_LIMIT_BURST: '100000',
    HERALD_SENDER_RATE_LIMIT_PER_SECOND: '1000000',
    HERALD_SENDER_RATE_LIMIT_BURST: '1000000',
    HERALD_MAX_CONNECTIONS_PER_USER: '100',
  };
  try {
    const realtime = await Promise.all(
      ['rt-a', 'rt-b'].map((name) =>
        startApp({
          name,
          entry: '',
          command: process.execPath,
          args: ['--expose-gc', require.resolve('@herald/realtime/server')],
          env: { ...env, HERALD_INSTANCE_ID: name },
        }),
      ),
    );
    processes.push(...realtime);
    processes.push(await startApp({ name: 'worker', entry: require.resolve('@herald/worker/server'), env }));
    const gateway = await spawnQuiet(require.resolve('@herald/gateway/server'), env);
    processes.push(gateway);
    const worker = processes[2] as AppProcess;
    const pids = [
      [gateway.pid],
      [worker.process.pid],
      realtime.map((app) => app.process.pid),
      [redis.process.pid],
      [process.pid],
    ];
    const urls = realtime.map((app) => app.url);

    // 1,000 users, half on each instance.
    const latencies: { current: number[] | undefined } = { current: undefined };
    let received = 0;
    const clients: Socket[] = [];
    for (let i = 0; i < USERS; i++) {
      const socket = await connect(urls[i % 2] ?? '', `user-${i}`);
      const record = (t: number) => {
        received++;
        latencies.current?.push(now() - t);
      };
      socket.on('notification', (event: { payload: { t: number } }) => record(event.payload.t));
      clients.push(socket);
    }
    // The peer's users: as many, half on each of two bare Socket.IO servers on Redis (rooms by user).
    const peers = await Promise.all(
      ['peer-a', 'peer-b'].map((name) =>
        startBare(name, { BARE_REDIS_URL: redis.url, BARE_PUBSUB_KEY: PUBSUB }),
      ),
    );
    processes.push(...peers);
    for (let i = 0; i < USERS; i++) {
      const socket = await connectBare(peers[i % 2]?.url ?? '', `user-${i}`);
      socket.on('bench', (event: { t: number }) => {
        received++;
        latencies.current?.push(now() - event.t);
      });
      clients.push(socket);
    }
    process.stderr.write(`[bench] ${USERS} users connected (and ${USERS} to the peer)\n`);

    const agent = new Agent({ keepAlive: true, maxSockets: 128 });
    const herald = (user: string) => postNotify(agent, gateway.url, user, { t: now() });
    const emitterRedis = new Redis(redis.url);
    const emitter = new Emitter(emitterRedis, { key: PUBSUB });
    // Herald without the gateway: the job the gateway would write, added straight to the queue.
    const queue = new Queue<NotificationJob>(DEFAULT_QUEUE_NAME, {
      prefix: DEFAULT_QUEUE_PREFIX,
      connection: { url: redis.url },
    });
    const fromQueue = async (user: string) => {
      const job: NotificationJob = {
        id: randomUUID(),
        userId: user,
        payload: { t: now() },
        createdAt: new Date().toISOString(),
      };
      await queue.add(NOTIFY_JOB_NAME, job, notificationJobOptions(job));
      return true;
    };
    const peer = async (user: string) => {
      emitter.to(`user:default/${user}`).emit('bench', { t: now() }); // bare-socketio.ts's room
      return true;
    };

    const run = async (
      send: (user: string) => Promise<boolean>,
      rate: number,
      seconds: number,
    ): Promise<Sample> => {
      const sample: Sample = { latencies: [], sent: 0, accepted: 0, refused: 0, received: 0 };
      const receivedBefore = received;
      const inFlight = new Set<Promise<unknown>>();
      const start = now();
      const cpuBefore = pids.map(cpuTicks);
      const end = start + WARMUP_MS + seconds * 1000;
      let next = 0;
      while (now() < end) {
        // Open loop: the schedule does not wait for answers (up to 2,000 requests in flight).
        const due = Math.floor(((now() - start) / 1000) * rate);
        while (next < due && inFlight.size < 2000) {
          if (next === Math.floor((WARMUP_MS / 1000) * rate)) latencies.current = sample.latencies;
          const p = send(`user-${next % USERS}`).then(
            (ok) => (ok ? sample.accepted++ : sample.refused++),
            () => sample.refused++,
          );
          inFlight.add(p);
          void p.finally(() => inFlight.delete(p));
          next++;
          sample.sent++;
        }
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
      const elapsed = (now() - start) / 1000;
      sample.cpu = pids
        .map(cpuTicks)
        .map((ticks, i) => Math.round(((ticks - (cpuBefore[i] ?? 0)) / 100 / elapsed) * 100))
        .join(' / ');
      await Promise.all(inFlight);
      // Drain: wait (bounded) until everything accepted has arrived, so that runs do not overlap.
      await waitFor(() => received - receivedBefore >= sample.accepted, {
        timeoutMs: 90_000,
        intervalMs: 50,
      }).catch(() => undefined);
      latencies.current = undefined;
      sample.received = received - receivedBefore;
      return sample;
    };

    const rows: string[][] = [];
    const results = new Map<number, Sample>();
    for (const rate of RATES) {
      const h = await run(herald, rate, SECONDS);
      const q = await run(fromQueue, rate, SECONDS);
      const p = await run(peer, rate, SECONDS);
      results.set(rate, h);
      rows.push(row(`Herald, ${rate}/s`, h, SECONDS, p));
      rows.push(row(`Herald from the queue (no gateway), ${rate}/s`, q, SECONDS, p));
      rows.push(row(`peer (bare redis-emitter), ${rate}/s`, p, SECONDS));
      process.stderr.write(`[bench] ${rate}/s done\n`);
    }

    // Highest rate with p99 < 100 ms: probe above the best tested rate (or between), then hold it.
    const passes = (s: Sample) => s.received >= s.accepted && s.refused === 0 && pct(s.latencies, 0.99) < 100;
    let good = Math.max(0, ...RATES.filter((rate) => passes(results.get(rate) as Sample)));
    let bad = Math.min(
      Number.POSITIVE_INFINITY,
      ...RATES.filter((rate) => !passes(results.get(rate) as Sample)),
    );
    for (let probe = 0; probe < 3; probe++) {
      const rate = Number.isFinite(bad) ? Math.round((good + bad) / 2 / 100) * 100 : good * 2;
      if (rate <= good || rate >= bad) break;
      const s = await run(herald, rate, SECONDS);
      rows.push(row(`Herald probe, ${rate}/s`, s, SECONDS));
      if (passes(s)) good = rate;
      else bad = rate;
    }
    let held = 'none';
    if (good > 0) {
      const s = await run(herald, good, HOLD_SECONDS);
      rows.push(row(`Herald held ${HOLD_SECONDS} s, ${good}/s`, s, HOLD_SECONDS));
      held = passes(s) ? `${good}/s` : `${good}/s did not hold for ${HOLD_SECONDS} s`;
    }

    // Memory per idle connection: disconnect everyone, measure, connect IDLE idle users, measure.
    for (const socket of clients) socket.disconnect();
    await waitFor(async () => (await Promise.all(urls.map(health))).every((h) => h.connections === 0), {
      timeoutMs: 30_000,
    });
    await Promise.all(peers.map((peer) => peer.stop()));
    const bare = await startBare('bare', {});
    processes.push(bare);
    const memory = [
      await idleMemory(urls, (url, i) => connect(url, `idle-${i}`)),
      await idleMemory([bare.url], (url) => connectBare(url)),
    ];

    await emitterRedis.quit();
    await queue.close();
    agent.destroy();
    printReport(rows, held, memory, Date.now() - started);
  } finally {
    await Promise.all(processes.map((p) => p.stop().catch(() => undefined)));
    await redis.dispose();
  }
}

async function connect(url: string, userId: string): Promise<Socket> {
  const { token } = await signUserToken({
    userId,
    tenantId: 'default',
    keyId: 'bench',
    secret: SECRET,
    ttlSeconds: 3600,
  });
  const socket = io(url, { auth: { token }, transports: ['websocket'], reconnection: false, forceNew: true });
  await new Promise<void>((resolve, reject) => {
    socket.once('synced', () => resolve());
    socket.once('connect_error', reject);
  });
  return socket;
}

/** A bare Socket.IO server (bare-socketio.ts), its own process. */
function startBare(name: string, env: Record<string, string>): Promise<AppProcess> {
  return startApp({
    name,
    entry: '',
    command: process.execPath,
    args: ['--expose-gc', '--import', 'tsx', fileURLToPath(new URL('./bare-socketio.ts', import.meta.url))],
    env,
  });
}

async function connectBare(url: string, userId?: string): Promise<Socket> {
  const socket = io(url, {
    transports: ['websocket'],
    reconnection: false,
    forceNew: true,
    ...(userId === undefined ? {} : { auth: { userId } }),
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('connect_error', reject);
  });
  return socket;
}

async function health(
  url: string,
): Promise<{ connections: number; heapUsedBytes: number; rssBytes: number }> {
  const response = await fetch(`${url}/healthz?gc=1`);
  return (await response.json()) as { connections: number; heapUsedBytes: number; rssBytes: number };
}

/** Heap and RSS per connection, in bytes, over `urls` with IDLE connections spread evenly. */
async function idleMemory(
  urls: string[],
  open: (url: string, i: number) => Promise<Socket>,
): Promise<{ heap: number; rss: number }> {
  const before = await Promise.all(urls.map(health));
  const sockets: Socket[] = [];
  for (let i = 0; i < IDLE; i += 100) {
    sockets.push(
      ...(await Promise.all(
        Array.from({ length: Math.min(100, IDLE - i) }, (_, k) =>
          open(urls[(i + k) % urls.length] ?? '', i + k),
        ),
      )),
    );
  }
  await waitFor(
    async () => (await Promise.all(urls.map(health))).reduce((n, h) => n + h.connections, 0) === IDLE,
    {
      timeoutMs: 60_000,
    },
  );
  const after = await Promise.all(urls.map(health));
  for (const socket of sockets) socket.disconnect();
  const sum = (list: { heapUsedBytes: number; rssBytes: number }[], key: 'heapUsedBytes' | 'rssBytes') =>
    list.reduce((n, h) => n + h[key], 0);
  return {
    heap: (sum(after, 'heapUsedBytes') - sum(before, 'heapUsedBytes')) / IDLE,
    rss: (sum(after, 'rssBytes') - sum(before, 'rssBytes')) / IDLE,
  };
}

function postNotify(
  agent: Agent,
  base: string,
  userId: string,
  payload: Record<string, unknown>,
): Promise<boolean> {
  const body = JSON.stringify({ userId, payload });
  return new Promise((resolve, reject) => {
    const req = request(
      `${base}/notify`,
      {
        method: 'POST',
        agent,
        headers: {
          authorization: `Bearer ${API_KEY}`,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
        },
      },
      (response) => {
        response.resume();
        response.on('end', () => resolve(response.statusCode === 202));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** The gateway with warn-level logs (info logs every request), ready when it answers HTTP. */
async function spawnQuiet(
  entry: string,
  env: Record<string, string>,
): Promise<{ url: string; pid: number | undefined; stop(): Promise<unknown> }> {
  const port = await freePort();
  const child: ChildProcess = spawn(process.execPath, [entry], {
    env: { ...process.env, ...env, PORT: String(port), HOST: '127.0.0.1', HERALD_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  await waitFor(
    async () => {
      const response = await fetch(`${url}/healthz`).catch(() => undefined);
      return response !== undefined;
    },
    { timeoutMs: 20_000, what: 'gateway' },
  );
  return {
    url,
    pid: child.pid,
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** utime + stime of processes, in clock ticks (100 per second on Linux). */
function cpuTicks(pidList: (number | undefined)[]): number {
  let ticks = 0;
  for (const pid of pidList) {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // not Linux, or gone
    }
  }
  return ticks;
}

function pct(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? Number.NaN;
}

function row(name: string, s: Sample, seconds: number, peer?: Sample): string[] {
  const f = (n: number) => (Number.isNaN(n) ? '-' : n.toFixed(1));
  const lost = s.accepted - s.received;
  return [
    name,
    String(Math.round(s.accepted / (seconds + WARMUP_MS / 1000))),
    f(pct(s.latencies, 0.5)),
    f(pct(s.latencies, 0.99)),
    f(pct(s.latencies, 0.999)),
    String(s.refused),
    String(lost),
    peer
      ? `${(pct(s.latencies, 0.5) / pct(peer.latencies, 0.5)).toFixed(1)}x / ${(pct(s.latencies, 0.99) / pct(peer.latencies, 0.99)).toFixed(1)}x`
      : '',
    s.cpu ?? '',
  ];
}

function printReport(
  rows: string[][],
  held: string,
  memory: { heap: number; rss: number }[],
  elapsedMs: number,
): void {
  const lines = [
    `machine: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, node ${process.version}, load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}`,
    `run: ${SECONDS} s per rate (+${WARMUP_MS / 1000} s warm-up), ${USERS} users over 2 realtime instances, 1 worker, 1 gateway; ${Math.round(elapsedMs / 1000)} s in all`,
    '',
    '| scenario | delivered/s | p50 ms | p99 ms | p99.9 ms | refused | not delivered | vs peer p50 / p99 | CPU % gateway / worker / realtime A+B / Redis / bench clients |',
    '| --- | --: | --: | --: | --: | --: | --: | --: | --: |',
    ...rows.map((r) => `| ${r.join(' | ')} |`),
    '',
    `highest rate held ${HOLD_SECONDS} s with p99 < 100 ms: ${held}`,
    '',
    `| idle connections (${IDLE}) | heap per connection | RSS per connection |`,
    '| --- | --: | --: |',
    `| Herald realtime (2 instances: auth, live channel, inbox replay, delivery state) | ${((memory[0]?.heap ?? 0) / 1024).toFixed(1)} KB | ${((memory[0]?.rss ?? 0) / 1024).toFixed(1)} KB |`,
    `| bare Socket.IO 4.8 server (1 process) | ${((memory[1]?.heap ?? 0) / 1024).toFixed(1)} KB | ${((memory[1]?.rss ?? 0) / 1024).toFixed(1)} KB |`,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  const p99 = rows.map((r) => ({ label: r[0] ?? '', value: Number(r[3]) }));
  writeReport('delivery', `${lines.join('\n')}\n\n${barChart('p99 latency by scenario', 'ms', p99)}`);
}

await main();
