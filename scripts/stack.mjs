#!/usr/bin/env node
// Starts the whole Herald stack in one terminal: gateway, worker, realtime and the web server (the
// inbox page), with prefixed logs; once every app is ready it prints the page's URL and a curl to try.
// When nothing answers at REDIS_URL (default redis://127.0.0.1:6379) and it points at this machine,
// it starts an embedded redis-server (data in a temp folder, stopped with the stack) and says so.
//
// The apps listen on 127.0.0.1 unless HOST says otherwise: development mode accepts public keys.
// Ports: HERALD_STACK_PORT (default 3000) for the gateway, then realtime, the worker and the web server.
//
// Stopping (Ctrl+C, SIGTERM, SIGHUP): each app runs in a process group of its own, so the terminal's
// Ctrl+C reaches this launcher alone and each app gets exactly one signal, from here (a second Ctrl+C,
// one more: it cuts their shutdown short). Once every app has exited, the embedded Redis is stopped (it
// outlives the apps, which use it while they shut down) and its folder removed; the exit code is 0 when
// every app exited cleanly. Nothing outlives the launcher: if it dies without stopping them (SIGKILL),
// the apps stop as on SIGTERM (scripts/stack-child.mjs) and so does the embedded Redis (its keeper, below).
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const target = new URL(redisUrl);
// What the messages show: REDIS_URL may carry Redis's password.
const shownUrl = target.password ? redisUrl.replace(`:${target.password}@`, ':***@') : redisUrl;
const host = target.hostname || '127.0.0.1';
const port = Number(target.port || 6379);
const say = (message) => process.stdout.write(`[stack] ${message}\n`);
const fail = (message) => {
  process.stderr.write(`[stack] ${message}\n`);
  process.exit(1);
};
const posix = process.platform !== 'win32';

// Each app on its own port (a PORT in this shell would otherwise send all four to one port).
const firstPort = Number(process.env.HERALD_STACK_PORT || 3000);
if (!Number.isInteger(firstPort) || firstPort < 1 || firstPort > 65532) {
  fail(
    `HERALD_STACK_PORT must be a port from 1 to 65532 (the apps take it and the 3 after it), not "${process.env.HERALD_STACK_PORT}"`,
  );
}
const ports = { gateway: firstPort, realtime: firstPort + 1, worker: firstPort + 2, web: firstPort + 3 };

// Where the apps listen: this machine only unless HOST is set (HOST=0.0.0.0 exposes them on purpose).
const listenHost = process.env.HOST || '127.0.0.1';
const loopback = /^(127\.\d+\.\d+\.\d+|::1|localhost)$/.test(listenHost);
const inUrl = (address) => (address.includes(':') ? `[${address}]` : address);
// Where this machine reaches them (the web server the gateway and realtime, the readiness checks): on
// every address (0.0.0.0, ::), through loopback; otherwise at HOST itself.
const reachHost = ['0.0.0.0', '::'].includes(listenHost) ? '127.0.0.1' : listenHost;
const local = (appPort) => `http://${inUrl(reachHost)}:${appPort}`;
// What the messages show: localhost wherever it reaches them.
const shownHost = ['127.0.0.1', '::1', 'localhost', '0.0.0.0', '::'].includes(listenHost)
  ? 'localhost'
  : inUrl(listenHost);
const shown = (appPort) => `http://${shownHost}:${appPort}`;

/** True when something speaking Redis answers PING at host:port within a second. */
function redisAnswers() {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (answer) => {
      socket.destroy();
      resolve(answer);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('error', () => done(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    // +PONG, or -NOAUTH when the server wants a password: either way Redis is there.
    socket.once('data', (data) => done(/^(\+PONG|-NOAUTH)/.test(data.toString())));
  });
}

async function waitForRedis(timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (keeperGone) return false;
    if (await redisAnswers()) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return false;
}

// The embedded redis-server runs under a keeper, a small sh in a session of its own: the terminal's
// Ctrl+C does not reach either, so Redis outlives the apps. The keeper reads a pipe from this launcher,
// which writes there the process id of each app it starts. At the pipe's end (the launcher closed it
// once every app had exited, or is gone, even killed with SIGKILL) the keeper waits for those apps to
// exit (15 s at most), stops redis-server (SIGTERM), waits for it and removes its data folder.
const REDIS_KEEPER = [
  'dir=$1',
  'shift',
  'redis-server "$@" &',
  'redis=$!',
  'apps=',
  'while read -r pid; do apps="$apps $pid"; done',
  'tenths=0',
  'for pid in $apps; do',
  '  while kill -0 "$pid" 2>/dev/null && [ "$tenths" -lt 150 ]; do sleep 0.1; tenths=$((tenths + 1)); done',
  'done',
  'kill -TERM "$redis" 2>/dev/null',
  'wait "$redis"',
  'rm -rf "$dir"',
].join('\n');
let keeper;
let keeperGone = false;
let redisDir;

/** Stops the embedded Redis (if any) and waits for it; SIGKILL after 10 s. */
async function stopRedis() {
  if (!keeper) return;
  if (!keeperGone) {
    const gone = new Promise((resolve) => keeper.once('exit', resolve));
    keeper.stdin.end();
    const timer = setTimeout(() => {
      say('the embedded redis-server did not stop within 10 s: SIGKILL');
      try {
        // The keeper's process group: the sh and redis-server.
        process.kill(-keeper.pid, 'SIGKILL');
      } catch {
        // gone meanwhile
      }
    }, 10_000);
    await gone;
    clearTimeout(timer);
  }
  rmSync(redisDir, { recursive: true, force: true });
}

if (await redisAnswers()) {
  say(`using the Redis at ${shownUrl}`);
} else {
  const onThisMachine = ['127.0.0.1', 'localhost', '::1', '[::1]'].includes(host);
  const hasBinary = spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
  if (!onThisMachine || !hasBinary || !posix) {
    fail(
      `Nothing answers at ${shownUrl}. Herald needs Redis 6.2 or newer; any one of these works:\n` +
        '  1. install redis-server (Debian/Ubuntu: sudo apt-get install redis-server; macOS: brew install redis) and run this again;\n' +
        // Published on REDIS_URL's port (on this machine), so that the Redis it starts answers there.
        `  2. docker run --rm -p 127.0.0.1:${onThisMachine ? port : 6379}:6379 redis:7-alpine   (then run this again${onThisMachine ? '' : ' with REDIS_URL=redis://127.0.0.1:6379'});\n` +
        '  3. set REDIS_URL to a Redis you already have, e.g. REDIS_URL=redis://my-redis:6379.',
    );
  }
  redisDir = mkdtempSync(join(tmpdir(), 'herald-stack-redis-'));
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', redisDir];
  keeper = spawn(
    '/bin/sh',
    ['-c', REDIS_KEEPER, 'redis-keeper', redisDir, ...args, '--save', '', '--appendonly', 'yes'],
    {
      detached: true,
      stdio: ['pipe', 'ignore', 'ignore'],
    },
  );
  keeper.once('exit', () => {
    keeperGone = true;
  });
  // The keeper gone early (it failed to start): its pipe says nothing more.
  keeper.stdin.on('error', () => {});
  if (!(await waitForRedis(10_000))) {
    await stopRedis();
    fail(`the embedded redis-server did not answer on port ${port}`);
  }
  say(
    `nothing answered at ${shownUrl}: started an embedded redis-server on port ${port} (data in ${redisDir}, stopped with the stack)`,
  );
}

// The one-terminal stack is for development: development mode accepts `dev-key` and the development
// JWT secret when HERALD_API_KEYS / HERALD_JWT_SECRET are unset (set them to try production settings).
const shared = {
  REDIS_URL: redisUrl,
  HERALD_DEV_MODE: process.env.HERALD_DEV_MODE || 'true',
  HERALD_LOG_FORMAT: process.env.HERALD_LOG_FORMAT ?? 'pretty',
  HOST: listenHost,
};
if (shared.HERALD_DEV_MODE === 'true') {
  say(
    `DEVELOPMENT MODE (HERALD_DEV_MODE=true): the API key "dev-key" and the public development JWT secret are accepted unless HERALD_API_KEYS / HERALD_JWT_SECRET are set. ${
      loopback
        ? `The apps listen on ${listenHost} only; never expose this stack.`
        : `HOST=${listenHost}: the apps can be reached from other machines, development keys included.`
    }`,
  );
} else if (!loopback) {
  say(`HOST=${listenHost}: the apps can be reached from other machines.`);
}

// Each app: `node --import stack-child.mjs <entry>`, its lines prefixed with its name (in colour on a
// terminal), in a process group of its own with an IPC channel to this launcher (see stack-child.mjs).
const childModule = pathToFileURL(join(root, 'scripts', 'stack-child.mjs')).href;
const colour = process.stdout.isTTY && !process.env.NO_COLOR;
const width = Math.max(...Object.keys(ports).map((name) => name.length));
const running = new Map();
let stopping = false;
let failed = false;
let killTimer;

function start(name, colourCode, entry, extraEnv = {}) {
  const env = {
    ...process.env,
    ...(colour && process.env.FORCE_COLOR === undefined ? { FORCE_COLOR: '1' } : {}),
    ...shared,
    PORT: String(ports[name]),
    ...extraEnv,
  };
  // The launcher's own setting (an app would warn about a HERALD_* variable it does not know).
  delete env.HERALD_STACK_PORT;
  const app = spawn(process.execPath, ['--import', childModule, join(root, 'apps', name, ...entry)], {
    detached: posix,
    env,
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  const prefix = colour ? `\x1b[${colourCode}m${name.padEnd(width)}\x1b[39m` : name.padEnd(width);
  for (const stream of [app.stdout, app.stderr]) {
    createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY }).on('line', (line) =>
      process.stdout.write(`${prefix} ${line}\n`),
    );
  }
  running.set(name, app);
  // The embedded Redis's keeper waits for it, should this launcher die without stopping it.
  if (keeper && !keeperGone && app.pid !== undefined) keeper.stdin.write(`${app.pid}\n`);
  let ended = false;
  const end = (code, signal) => {
    if (ended) return;
    ended = true;
    exited(name, code, signal);
  };
  // 'close': after its last output line.
  app.once('close', end);
  app.once('error', (error) => {
    say(`${name} could not start: ${error.message}`);
    end(1, null);
  });
}

/** Sends `signal` to every app still running; SIGKILL to those still running 15 s after the first stop. */
function stopApps(signal) {
  stopping = true;
  for (const app of running.values()) app.kill(signal);
  // The apps cut their own shutdown at 10 s.
  killTimer ??= setTimeout(() => {
    for (const [name, app] of running) {
      say(`${name} is still running 15 s after it was asked to stop: SIGKILL`);
      try {
        if (posix) process.kill(-app.pid, 'SIGKILL');
        else app.kill('SIGKILL');
      } catch {
        // gone meanwhile
      }
    }
  }, 15_000);
}

function exited(name, code, signal) {
  running.delete(name);
  const how = signal ? `on ${signal}` : `with code ${code}`;
  if (stopping) {
    if (code !== 0) failed = true;
    say(`${name} exited ${how}`);
  } else {
    failed = true;
    say(`${name} exited ${how}: stopping the others`);
    stopApps('SIGTERM');
  }
  if (running.size === 0) void finish();
}

/** Once every app has exited: stops the embedded Redis and exits, 0 when every app exited cleanly. */
async function finish() {
  clearTimeout(killTimer);
  if (keeper) say('stopping the embedded redis-server');
  await stopRedis();
  process.exit(failed ? 1 : 0);
}

// Ctrl+C reaches this launcher alone: each press is one signal to each app (SIGTERM and SIGHUP alike).
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => {
    if (!stopping) say(`${signal}: stopping the apps${keeper ? ', then the embedded Redis' : ''}`);
    stopApps(signal);
  });
}

start('gateway', 36, ['dist', 'server.js']);
start('worker', 35, ['dist', 'server.js']);
start('realtime', 32, ['dist', 'server.js']);
// The web server sends /api to the gateway and /socket.io to realtime: the ones started here.
start('web', 33, ['dist', 'server', 'server.js'], {
  HERALD_GATEWAY_URL: process.env.HERALD_GATEWAY_URL || local(ports.gateway),
  HERALD_REALTIME_URL: process.env.HERALD_REALTIME_URL || local(ports.realtime),
});

/** True when `url` answers 200 within a second. */
async function answers(url) {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(1000) });
    await response.body?.cancel();
    return response.ok;
  } catch {
    return false;
  }
}

// Once every app answers /readyz (at most 60 s), say where to look and what to send.
(async () => {
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (stopping) return;
    const ready = await Promise.all(
      Object.values(ports).map((appPort) => answers(`${local(appPort)}/readyz`)),
    );
    if (stopping) return;
    if (ready.every(Boolean)) break;
    if (Date.now() > deadline) {
      say('an app is still not ready after 60 s: see its log lines above');
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  const user = process.env.HERALD_DEMO_USER || 'alice';
  say(
    [
      `ready. Open the inbox of ${user}: ${shown(ports.web)}/`,
      `then send ${user} a notification (in development mode the API key is "dev-key"):`,
      '',
      `  curl -i -X POST ${shown(ports.gateway)}/notify \\`,
      `    -H 'Authorization: Bearer dev-key' -H 'Content-Type: application/json' \\`,
      `    -d '{"userId":"${user}","payload":{"title":"Hello","body":"from Herald"}}'`,
      '',
      `The operator dashboard: ${shown(ports.web)}/dashboard (admin key: ${
        process.env.HERALD_ADMIN_KEY ? 'your HERALD_ADMIN_KEY' : '"dev-admin-key", in development mode only'
      })`,
      '',
    ].join('\n'),
  );
})();
