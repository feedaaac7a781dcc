// One Herald pipeline of the delivery benchmark, each app its own OS process on its own redis-server:
// a gateway, a worker and two realtime instances, from this checkout or from a built checkout of an
// older commit (`BENCH_BASELINE`), which then signs its users' tokens with that commit's own code.
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { type Agent, request } from 'node:http';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { signUserToken } from '@herald/protocol';
import { type AppProcess, freePort, type RedisServerHandle, startApp, waitFor } from '@herald/testing';
import { io, type Socket } from 'socket.io-client';
import { commitOf } from '../report.js';

const require = createRequire(import.meta.url);

type SignUserToken = typeof signUserToken;

export interface Pipeline {
  /** `Herald`, or `baseline <short commit>`. */
  readonly label: string;
  readonly gatewayUrl: string;
  readonly realtimeUrls: string[];
  /** Process ids for the CPU column: gateway / worker / realtime A+B / Redis. */
  readonly pids: (number | undefined)[][];
  /** Connects `userId` (of `tenantId`, default `default`) to realtime `url` and resolves on its `synced`. */
  connect(url: string, userId: string, tenantId?: string): Promise<Socket>;
  stop(): Promise<void>;
}

/**
 * Starts a pipeline on `redis` with `env`: this checkout's apps, or those of the built checkout `root`.
 * Its user tokens are signed with `secret` by the same checkout's `@herald/protocol`.
 */
export async function startPipeline(options: {
  redis: RedisServerHandle;
  env: Record<string, string>;
  secret: string;
  root?: string;
}): Promise<Pipeline> {
  const { root, redis, secret } = options;
  const env = { ...options.env, REDIS_URL: redis.url };
  const entry = (app: string) =>
    root === undefined ? require.resolve(`@herald/${app}/server`) : join(root, `apps/${app}/dist/server.js`);
  const sign: SignUserToken =
    root === undefined
      ? signUserToken
      : (
          (await import(pathToFileURL(join(root, 'packages/protocol/dist/index.js')).href)) as {
            signUserToken: SignUserToken;
          }
        ).signUserToken;
  const label = root === undefined ? 'Herald' : `baseline ${commitOf(root)}`;
  const tag = root === undefined ? '' : 'base-';
  const apps: AppProcess[] = [];
  let gateway: { url: string; pid: number | undefined; stop(): Promise<unknown> } | undefined;
  const stopAll = () =>
    Promise.all([...apps, ...(gateway ? [gateway] : [])].map((p) => p.stop().catch(() => undefined)));
  try {
    // `into`: each app joins `apps` as soon as it is up, so that a failed start stops the others.
    const realtime = await Promise.all(
      ['rt-a', 'rt-b'].map((name) =>
        startApp({
          name: `${tag}${name}`,
          entry: '',
          command: process.execPath,
          args: ['--expose-gc', entry('realtime')],
          env: { ...env, HERALD_INSTANCE_ID: `${tag}${name}` },
          into: apps,
        }),
      ),
    );
    const worker: AppProcess = await startApp({
      name: `${tag}worker`,
      entry: entry('worker'),
      env,
      into: apps,
    });
    gateway = await spawnQuiet(entry('gateway'), env);
    return {
      label,
      gatewayUrl: gateway.url,
      realtimeUrls: realtime.map((app) => app.url),
      pids: [
        [gateway.pid],
        [worker.process.pid],
        realtime.map((app) => app.process.pid),
        [redis.process.pid],
      ],
      connect: async (url, userId, tenantId = 'default') => {
        // An older commit's signUserToken takes what it knows (userId, secret, ttlSeconds).
        const { token } = await sign({
          userId,
          tenantId,
          keyId: 'bench',
          secret,
          ttlSeconds: 3600,
        });
        const socket = io(url, {
          auth: { token },
          transports: ['websocket'],
          reconnection: false,
          forceNew: true,
        });
        await new Promise<void>((resolve, reject) => {
          socket.once('synced', () => resolve());
          socket.once('connect_error', reject);
        });
        return socket;
      },
      stop: async () => {
        await stopAll();
      },
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
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

/** `POST /notify` of `payload` to `userId` through `agent`: true on a 202 (rejects on a connection error). */
export function postNotify(
  agent: Agent,
  base: string,
  apiKey: string,
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
          authorization: `Bearer ${apiKey}`,
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

/**
 * Open-loop load: `send(n)` for n = 0, 1, … at `rate` per second for `seconds` (each due send goes out
 * whatever the earlier ones are doing), then waits for every one; answers how many resolved true (a 202).
 * A send that rejects counts as refused.
 */
export async function openLoop(
  rate: number,
  seconds: number,
  send: (n: number) => Promise<boolean>,
): Promise<number> {
  let accepted = 0;
  const inFlight = new Set<Promise<unknown>>();
  const start = performance.now();
  const total = rate * seconds;
  for (let sent = 0; sent < total; ) {
    const due = Math.min(total, Math.floor(((performance.now() - start) / 1000) * rate));
    while (sent < due) {
      const p = send(sent)
        .catch(() => false)
        .then((ok) => {
          if (ok) accepted++;
        });
      inFlight.add(p);
      void p.finally(() => inFlight.delete(p));
      sent++;
    }
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  await Promise.all(inFlight);
  return accepted;
}

/** utime + stime of processes, in clock ticks (100 per second on Linux). */
export function cpuTicks(pids: readonly (number | undefined)[]): number {
  let ticks = 0;
  for (const pid of pids) {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // not Linux, or gone
    }
  }
  return ticks;
}
