import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { connect } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stripVTControlCharacters } from 'node:util';
import { createHeraldClient } from '@herald/client';
import { freeLowPort, freePort, isPortFree, ping, waitFor } from '@herald/testing';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';

// `npx pnpm@12.4.2 start` runs `node scripts/stack.mjs` once the build is done (this package's tests run
// after its build and the gateway's, worker's and realtime's); here it runs as its own OS process, in a
// process group of its own as in a terminal, on free ports and with an embedded redis-server of its own.
const LAUNCHER = fileURLToPath(new URL('../../../scripts/stack.mjs', import.meta.url));
const APPS = ['gateway', 'realtime', 'worker', 'web'] as const;

/** A running `node scripts/stack.mjs`. */
interface Launcher {
  process: ChildProcess;
  /** Its ports, from HERALD_STACK_PORT: gateway, realtime, worker, web. */
  ports: Record<(typeof APPS)[number], number>;
  redisPort: number;
  /** Everything it printed (stdout and stderr, colours removed). */
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** The first of four consecutive ports free a moment ago (the launcher takes HERALD_STACK_PORT to +3). */
async function freePortRun(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const first = await freeLowPort(3);
    if ((await isPortFree(first + 1)) && (await isPortFree(first + 2))) return first;
  }
  throw new Error('no four consecutive free ports');
}

const launchers: Launcher[] = [];

/** Starts the launcher with `extra` on top of this environment (without HOST, PORT, REDIS_URL, HERALD_*). */
async function startLauncher(extra: Record<string, string> = {}): Promise<Launcher> {
  const first = await freePortRun();
  const redisPort = await freePort();
  const env: Record<string, string | undefined> = { ...process.env };
  for (const name of Object.keys(env)) {
    if (/^(HERALD_|REDIS_URL$|HOST$|PORT$|FORCE_COLOR$)/.test(name)) delete env[name];
  }
  const child = spawn(process.execPath, [LAUNCHER], {
    // A process group of its own, as a terminal's foreground job: Ctrl+C is a SIGINT to the group.
    detached: true,
    env: {
      ...env,
      REDIS_URL: `redis://127.0.0.1:${redisPort}`,
      HERALD_STACK_PORT: String(first),
      ...extra,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  for (const stream of [child.stdout, child.stderr]) {
    stream?.setEncoding('utf8');
    stream?.on('data', (text: string) => {
      output += text;
    });
  }
  const launcher: Launcher = {
    process: child,
    ports: { gateway: first, realtime: first + 1, worker: first + 2, web: first + 3 },
    redisPort,
    output: () => stripVTControlCharacters(output),
    // 'close': once its output has all been read too.
    exited: new Promise((resolve) => child.once('close', (code, signal) => resolve({ code, signal }))),
  };
  launchers.push(launcher);
  return launcher;
}

/** Its process id (its process group's too). */
function pidOf(launcher: Launcher): number {
  const pid = launcher.process.pid;
  if (pid === undefined) throw new Error('the launcher did not start');
  return pid;
}

/** Its embedded Redis's data folder, as it announced it. */
function redisFolder(launcher: Launcher): string {
  const folder = /\(data in (\S+?),/.exec(launcher.output())?.[1];
  if (!folder) throw new Error(`no embedded Redis announced:\n${launcher.output()}`);
  return folder;
}

/** Waits until every app is ready (the launcher says so) and the gateway answers. */
async function waitReady(launcher: Launcher): Promise<void> {
  await waitFor(
    async () => {
      if (launcher.process.exitCode !== null) throw new Error(`exited early:\n${launcher.output()}`);
      if (!launcher.output().includes('[stack] ready.')) return false;
      const response = await fetch(`http://127.0.0.1:${launcher.ports.gateway}/readyz`, {
        signal: AbortSignal.timeout(1000),
      });
      await response.arrayBuffer();
      return response.ok;
    },
    { timeoutMs: 90_000, intervalMs: 100, what: 'the stack to be ready' },
  );
}

/** How the launcher exited, or an error with its output when it runs `ms` longer. */
async function exitWithin(
  launcher: Launcher,
  ms: number,
): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`still running after ${ms} ms:\n${launcher.output()}`)), ms);
  });
  try {
    return await Promise.race([launcher.exited, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** 'connected', or the error code of a TCP connection to host:port (2 s at most). */
function connectOutcome(host: string, port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (outcome: string) => {
      socket.destroy();
      resolve(outcome);
    };
    socket.setTimeout(2000, () => done('timeout'));
    socket.once('connect', () => done('connected'));
    socket.once('error', (error: NodeJS.ErrnoException) => done(error.code ?? error.message));
  });
}

/**
 * This machine's addresses other than loopback, where another machine on the network would connect (the
 * link-local IPv6 ones need a zone and are left out); on Linux also 127.0.0.2, which a server on every
 * interface answers and one on 127.0.0.1 does not (all of 127.0.0.0/8 is loopback there).
 */
function nonLoopbackAddresses(): string[] {
  const addresses = Object.values(networkInterfaces())
    .flat()
    .filter((address) => address !== undefined && !address.internal && !address.address.startsWith('fe80'))
    .map((address) => address?.address ?? '');
  if (process.platform === 'linux') addresses.push('127.0.0.2');
  return addresses;
}

/** Command lines of the running redis-servers that listen on `port` (redis-server shows it in its title). */
function redisServersOn(port: number): string[] {
  const ps = spawnSync('ps', ['-eo', 'args'], { encoding: 'utf8' });
  return ps.stdout
    .split('\n')
    .filter((line) => line.includes('redis-server') && new RegExp(`:${port}\\b`).test(line));
}

/** The process ids of `pid`'s children. */
function childrenOf(pid: number): number[] {
  const ps = spawnSync('ps', ['-eo', 'pid=,ppid='], { encoding: 'utf8' });
  return ps.stdout
    .split('\n')
    .map((line) => line.trim().split(/\s+/).map(Number))
    .filter(([, parent]) => parent === pid)
    .map(([child]) => child ?? 0);
}

/** True while process `pid` exists. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** True when nothing answers at 127.0.0.1:port. */
async function closed(port: number): Promise<boolean> {
  return (await connectOutcome('127.0.0.1', port)) !== 'connected';
}

describe('the one-terminal stack (node scripts/stack.mjs, as `npx pnpm@12.4.2 start` runs it)', () => {
  afterEach(async () => {
    // Whatever a failed test left: the launcher's process group, then its Redis and data folder.
    for (const launcher of launchers.splice(0)) {
      let folder: string | undefined;
      try {
        folder = redisFolder(launcher);
      } catch {
        // no embedded Redis
      }
      if (launcher.process.pid !== undefined) {
        try {
          process.kill(-launcher.process.pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      await launcher.exited;
      if (await ping(`redis://127.0.0.1:${launcher.redisPort}`)) {
        const redis = new Redis(`redis://127.0.0.1:${launcher.redisPort}`, { lazyConnect: true });
        redis.on('error', () => {});
        await redis.call('SHUTDOWN', 'NOSAVE').catch(() => {});
        redis.disconnect();
      }
      if (folder) rmSync(folder, { recursive: true, force: true });
    }
  });

  it('listens on 127.0.0.1 only; Ctrl+C (SIGINT to its process group) stops each app once and cleanly, then Redis; exit 0', async () => {
    const launcher = await startLauncher();
    await waitReady(launcher);
    const folder = redisFolder(launcher);
    expect(existsSync(folder)).toBe(true);

    // Reachable from this machine, not from the network.
    const outside = nonLoopbackAddresses();
    expect(outside.length).toBeGreaterThan(0);
    for (const app of APPS) {
      const port = launcher.ports[app];
      expect(await connectOutcome('127.0.0.1', port), `${app} on 127.0.0.1`).toBe('connected');
      for (const address of outside) {
        expect(await connectOutcome(address, port), `${app} at ${address}:${port}`).not.toBe('connected');
      }
    }
    // What the launcher printed works, and the web server reaches the gateway and realtime it started.
    const output = launcher.output();
    expect(output).toContain(`http://localhost:${launcher.ports.web}/`);
    expect(output).toContain(`curl -i -X POST http://localhost:${launcher.ports.gateway}/notify`);
    const web = `http://localhost:${launcher.ports.web}`;
    const api = await fetch(`${web}/api/readyz`);
    expect(api.status).toBe(200);
    await api.arrayBuffer();
    // A page's path: a token from the web server (through the gateway), a WebSocket through the web
    // server to realtime, a notification sent to the gateway delivered by the worker.
    const token = await fetch(`${web}/dev/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ userId: 'alice' }),
    });
    expect(token.status).toBe(200);
    const { token: alice } = (await token.json()) as { token: string };
    const client = createHeraldClient({ url: web, getToken: () => alice, tabs: false });
    const received: string[] = [];
    client.on('notification', (item) => received.push(item.id));
    try {
      await waitFor(() => client.getState().connection === 'live', {
        timeoutMs: 30_000,
        what: 'the client live through the web server',
      });
      const sent = await fetch(`http://localhost:${launcher.ports.gateway}/notify`, {
        method: 'POST',
        headers: { authorization: 'Bearer dev-key', 'content-type': 'application/json' },
        body: JSON.stringify({ userId: 'alice', payload: { title: 'Hello', body: 'from Herald' } }),
      });
      expect(sent.status).toBe(202);
      const { id } = (await sent.json()) as { id: string };
      await waitFor(() => received.includes(id), {
        timeoutMs: 30_000,
        what: 'the notification on the socket',
      });
    } finally {
      client.close();
    }

    process.kill(-pidOf(launcher), 'SIGINT');
    const exit = await exitWithin(launcher, 30_000);
    const log = launcher.output();
    expect(exit, log).toEqual({ code: 0, signal: null });
    for (const app of APPS) {
      // Each app shut down on its one SIGINT, by itself.
      expect(log, app).toMatch(new RegExp(`^${app}\\s.*shutting down.*SIGINT`, 'm'));
    }
    expect(log).not.toContain('ECONNREFUSED');
    expect(log).not.toContain('second SIGINT');
    expect(log).not.toContain('killed by timeout');
    expect(redisServersOn(launcher.redisPort)).toEqual([]);
    expect(await ping(`redis://127.0.0.1:${launcher.redisPort}`)).toBe(false);
    expect(existsSync(folder)).toBe(false);
    for (const app of APPS) expect(await closed(launcher.ports[app]), app).toBe(true);
  }, 150_000);

  it('an app that exits at start-up stops the others and the embedded Redis; exit 1', async () => {
    // The web server refuses a gateway URL that is not http(s): it exits with 1 as it starts.
    const launcher = await startLauncher({ HERALD_GATEWAY_URL: 'not-a-url' });
    const exit = await exitWithin(launcher, 90_000);
    const log = launcher.output();
    expect(exit, log).toEqual({ code: 1, signal: null });
    expect(log).toContain('HERALD_GATEWAY_URL');
    expect(redisServersOn(launcher.redisPort)).toEqual([]);
    expect(await ping(`redis://127.0.0.1:${launcher.redisPort}`)).toBe(false);
    expect(existsSync(redisFolder(launcher))).toBe(false);
    for (const app of APPS) expect(await closed(launcher.ports[app]), app).toBe(true);
  }, 150_000);

  it('no Redis and no redis-server: exits 1 naming the ways out, the docker one on REDIS_URL’s port', async () => {
    // A PATH with node alone: no redis-server to start.
    const bin = mkdtempSync(join(tmpdir(), 'herald-path-'));
    symlinkSync(process.execPath, join(bin, 'node'));
    const launcher = await startLauncher({ PATH: bin });
    const exit = await exitWithin(launcher, 30_000).finally(() => rmSync(bin, { recursive: true }));
    const log = launcher.output();
    expect(exit, log).toEqual({ code: 1, signal: null });
    expect(log).toContain(`Nothing answers at redis://127.0.0.1:${launcher.redisPort}`);
    // Published on that port, so that the Redis it starts answers at REDIS_URL.
    expect(log).toContain(`docker run --rm -p 127.0.0.1:${launcher.redisPort}:6379 redis:7-alpine`);
    for (const app of APPS) expect(await closed(launcher.ports[app]), app).toBe(true);
  }, 60_000);

  it('the launcher killed with SIGKILL alone: the apps and its embedded Redis stop, the folder is removed', async () => {
    const launcher = await startLauncher();
    await waitReady(launcher);
    const folder = redisFolder(launcher);
    // What it started: the four apps and the embedded Redis's keeper.
    const children = childrenOf(pidOf(launcher));
    expect(children.length).toBe(5);
    process.kill(pidOf(launcher), 'SIGKILL');
    await launcher.exited;
    await waitFor(
      async () =>
        children.every((pid) => !alive(pid)) &&
        redisServersOn(launcher.redisPort).length === 0 &&
        !existsSync(folder) &&
        (await Promise.all(APPS.map((app) => closed(launcher.ports[app])))).every(Boolean),
      {
        timeoutMs: 60_000,
        intervalMs: 100,
        what: 'the apps, the embedded Redis and its folder to be gone',
      },
    );
  }, 150_000);
});
