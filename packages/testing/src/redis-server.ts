import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from './ports.js';
import { waitFor } from './wait.js';

/** A `redis-server` process owned by a test. */
export interface RedisServerHandle {
  port: number;
  url: string;
  process: ChildProcess;
  /** Stops the server (SIGTERM, then SIGKILL) and waits for it to exit. */
  stop(): Promise<void>;
  /** Starts it again on the same port with the same data folder. */
  restart(): Promise<void>;
  /** Stops it and removes its data folder. */
  dispose(): Promise<void>;
}

/** True when a `redis-server` binary is on PATH. */
export function hasRedisServerBinary(): boolean {
  return spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
}

/**
 * Starts `redis-server` on a free port (or `options.port`) with its data in a temp folder, and waits
 * until it answers PING (up to `startTimeoutMs`, default 10 s). `wrapper` runs it under another command,
 * e.g. `['valgrind', '--tool=callgrind']` (then `process` is the wrapper's, which runs redis-server).
 */
export async function startRedisServer(
  options: {
    port?: number;
    args?: string[];
    wrapper?: string[];
    startTimeoutMs?: number;
    /** `requirepass` (and `masterauth`, for a replica or a Cluster node): `url` then carries it. */
    password?: string;
  } = {},
): Promise<RedisServerHandle> {
  const port = options.port ?? (await freePort());
  const dir = mkdtempSync(join(tmpdir(), 'herald-redis-'));
  const args = [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--appendonly',
    'no',
    '--dir',
    dir,
    ...(options.password === undefined
      ? []
      : ['--requirepass', options.password, '--masterauth', options.password]),
    ...(options.args ?? []),
  ];
  const auth = options.password === undefined ? '' : `:${encodeURIComponent(options.password)}@`;
  const url = `redis://${auth}127.0.0.1:${port}`;
  let child: ChildProcess;

  const launch = async (): Promise<void> => {
    const [command = 'redis-server', ...rest] = [...(options.wrapper ?? []), 'redis-server', ...args];
    child = spawn(command, rest, { stdio: 'ignore' });
    await waitFor(() => ping(url), {
      timeoutMs: options.startTimeoutMs ?? 10_000,
      what: `redis-server on port ${port}`,
    });
  };
  const stop = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
    await exited;
    clearTimeout(timer);
  };

  await launch();
  return {
    port,
    url,
    get process() {
      return child;
    },
    stop,
    restart: launch,
    async dispose() {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** True when the Redis at `url` answers PING within a second. */
export async function ping(url: string): Promise<boolean> {
  try {
    return (await withProbeClient(url, (client) => client.ping())) === 'PONG';
  } catch {
    return false;
  }
}

/**
 * Runs `use` on a short-lived client of the Redis at `url` that fails fast (1 s to connect, no retry,
 * no offline queue) and is closed afterwards.
 */
export async function withProbeClient<T>(url: string, use: (client: Redis) => Promise<T>): Promise<T> {
  const client = new Redis(url, {
    lazyConnect: true,
    connectTimeout: 1000,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  client.on('error', () => {});
  try {
    await client.connect();
    return await use(client);
  } finally {
    client.disconnect();
  }
}
