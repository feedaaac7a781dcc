#!/usr/bin/env node
// Starts the whole Herald stack in one terminal: gateway, worker, realtime and the web server (the
// inbox page), with prefixed logs; once every app is ready it prints the page's URL and a curl to try.
// When nothing answers at REDIS_URL (default redis://127.0.0.1:6379) and it points at this machine,
// it starts an embedded redis-server (data in a temp folder, stopped with the stack) and says so.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import concurrently from 'concurrently';

const root = fileURLToPath(new URL('..', import.meta.url));
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const target = new URL(redisUrl);
// What the messages show: REDIS_URL may carry Redis's password.
const shownUrl = target.password ? redisUrl.replace(`:${target.password}@`, ':***@') : redisUrl;
const host = target.hostname || '127.0.0.1';
const port = Number(target.port || 6379);
const say = (message) => process.stdout.write(`[stack] ${message}\n`);

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
    if (await redisAnswers()) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return false;
}

let embedded;
if (await redisAnswers()) {
  say(`using the Redis at ${shownUrl}`);
} else {
  const local = ['127.0.0.1', 'localhost', '::1', '[::1]'].includes(host);
  const hasBinary = spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
  if (!local || !hasBinary) {
    process.stderr.write(
      `[stack] Nothing answers at ${shownUrl}. Herald needs Redis 6.2 or newer; any one of these works:\n` +
        '  1. install redis-server (Debian/Ubuntu: sudo apt-get install redis-server; macOS: brew install redis) and run this again;\n' +
        '  2. docker run --rm -p 127.0.0.1:6379:6379 redis:7-alpine   (then run this again);\n' +
        '  3. set REDIS_URL to a Redis you already have, e.g. REDIS_URL=redis://my-redis:6379.\n',
    );
    process.exit(1);
  }
  const dir = mkdtempSync(join(tmpdir(), 'herald-stack-redis-'));
  embedded = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'yes'],
    { stdio: 'ignore' },
  );
  embedded.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  if (!(await waitForRedis(10_000))) {
    process.stderr.write(`[stack] the embedded redis-server did not answer on port ${port}\n`);
    embedded.kill('SIGKILL');
    process.exit(1);
  }
  say(
    `nothing answered at ${shownUrl}: started an embedded redis-server on port ${port} (data in ${dir}, stopped with the stack)`,
  );
}

// The one-terminal stack is for development: development mode accepts `dev-key` and the development
// JWT secret when HERALD_API_KEYS / HERALD_JWT_SECRET are unset (set them to try production settings).
const env = {
  REDIS_URL: redisUrl,
  HERALD_DEV_MODE: process.env.HERALD_DEV_MODE || 'true',
  HERALD_LOG_FORMAT: process.env.HERALD_LOG_FORMAT ?? 'pretty',
};
if (env.HERALD_DEV_MODE === 'true') {
  say(
    'DEVELOPMENT MODE (HERALD_DEV_MODE=true): the API key "dev-key" and the public development JWT secret are accepted unless HERALD_API_KEYS / HERALD_JWT_SECRET are set. Never expose this stack.',
  );
}
// Each app on its own port (a PORT in this shell would otherwise send all three to one port).
const app = (name, color, port, entry = join('dist', 'server.js')) => ({
  name,
  prefixColor: color,
  command: `node ${JSON.stringify(join(root, 'apps', name, entry))}`,
  env: { ...env, PORT: String(port) },
});
const ports = { gateway: 3000, realtime: 3001, worker: 3002, web: 3003 };
const { result } = concurrently(
  [
    app('gateway', 'cyan', ports.gateway),
    app('worker', 'magenta', ports.worker),
    app('realtime', 'green', ports.realtime),
    // The web server sends /api to the gateway and /socket.io to realtime (its defaults: the ports above).
    app('web', 'yellow', ports.web, join('dist', 'server', 'server.js')),
  ],
  {
    prefix: '{name}',
    padPrefix: true,
    killOthersOn: ['failure'],
    killSignal: 'SIGTERM',
    handleInput: false,
  },
);

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
    const ready = await Promise.all(
      Object.values(ports).map((port) => answers(`http://127.0.0.1:${port}/readyz`)),
    );
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
      `ready. Open the inbox of ${user}: http://localhost:${ports.web}/`,
      `then send ${user} a notification (in development mode the API key is "dev-key"):`,
      '',
      `  curl -i -X POST http://localhost:${ports.gateway}/notify \\`,
      `    -H 'Authorization: Bearer dev-key' -H 'Content-Type: application/json' \\`,
      `    -d '{"userId":"${user}","payload":{"title":"Hello","body":"from Herald"}}'`,
      '',
      `The operator dashboard: http://localhost:${ports.web}/dashboard (admin key: ${
        process.env.HERALD_ADMIN_KEY ? 'your HERALD_ADMIN_KEY' : '"dev-admin-key", in development mode only'
      })`,
      '',
    ].join('\n'),
  );
})();

const stopRedis = () => {
  if (embedded && embedded.exitCode === null) embedded.kill('SIGTERM');
};
process.on('exit', stopRedis);
result.then(
  () => {
    stopRedis();
    process.exit(0);
  },
  () => {
    stopRedis();
    process.exit(1);
  },
);
