// Fan-out benchmark: a topic send (POST /notify with `topic`) to 10,000 and to 100,000 subscribers, through
// the whole pipeline (gateway, worker, two realtime instances, each its own OS process, on a redis-server of
// its own): recipients per second from acceptance to `sent`, and Redis CPU per recipient (INFO cpu and
// commandstats of that private Redis). During the 100,000 one, another tenant sends single notifications at
// BENCH_SINGLES_PER_SECOND to a user on a real socket.io-client: their p99 (POST → on the socket) is
// compared with the same sends on a quiet system, the same run.
//
// Usage: pnpm --filter @herald/bench fanout   (after `pnpm build`)
// Env:   BENCH_SIZES (10000,100000), BENCH_SINGLES_PER_SECOND (20), BENCH_QUIET_SECONDS (10)
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { cpus, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { Topics } from '@herald/inbox';
import { startRedisServer, waitFor } from '@herald/testing';
import { Redis } from 'ioredis';
import { startPipeline } from '../delivery/pipeline.js';
import { writeReport } from '../report.js';
import { writeChart } from '../svg.js';

const SIZES = (process.env.BENCH_SIZES ?? '10000,100000').split(',').map(Number);
const SINGLES_PER_SECOND = Number(process.env.BENCH_SINGLES_PER_SECOND ?? 20);
const QUIET_SECONDS = Number(process.env.BENCH_QUIET_SECONDS ?? 10);
// 32+ bytes each, as the apps require outside development mode.
const SECRET = 'bench-secret-0123456789abcdef0123456789';
const API_KEY = 'bench-key-0123456789abcdef0123456789abcdef';

const require = createRequire(import.meta.url);

/** Creates an API key of tenant `tenant` with `herald keys create`, as an operator does; answers the key. */
async function createKey(env: Record<string, string>, tenant: string, extra: string[]): Promise<string> {
  const bin = join(dirname(require.resolve('@herald/cli/package.json')), 'dist', 'bin.js');
  const child = spawn(
    process.execPath,
    [bin, 'keys', 'create', '--name', tenant, '--tenant', tenant, ...extra],
    {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    out += chunk.toString();
  });
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  const key = /key:\s+(hk_\S+)/.exec(out)?.[1];
  if (code !== 0 || !key) throw new Error(`herald keys create failed (${code}): ${out}`);
  return key;
}

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return (
    sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? Number.NaN
  );
}

/** Redis's own CPU (user + sys), in µs. */
async function redisCpuMicros(redis: Redis): Promise<number> {
  const info = await redis.info('cpu');
  const field = (name: string) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? 0);
  return (field('used_cpu_user') + field('used_cpu_sys')) * 1e6;
}

/** The commands that took most of Redis's time since the last CONFIG RESETSTAT: name, calls, µs. */
async function topCommands(
  redis: Redis,
  count: number,
): Promise<{ name: string; calls: number; usec: number }[]> {
  const info = await redis.info('commandstats');
  return [...info.matchAll(/cmdstat_([^:]+):calls=(\d+),usec=(\d+)/g)]
    .map((m) => ({ name: m[1] ?? '', calls: Number(m[2]), usec: Number(m[3]) }))
    .sort((a, b) => b.usec - a.usec)
    .slice(0, count);
}

async function main(): Promise<void> {
  const started = Date.now();
  const redisServer = await startRedisServer();
  const redis = new Redis(redisServer.url);
  const env = {
    HERALD_API_KEYS: API_KEY,
    HERALD_JWT_SECRET: SECRET,
    HERALD_RATE_LIMIT_PER_SECOND: '100000',
    HERALD_RATE_LIMIT_BURST: '100000',
  };
  const pipeline = await startPipeline({ redis: redisServer, env, secret: SECRET });
  const bulkKey = await createKey({ ...env, REDIS_URL: redisServer.url }, 'bulk', [
    '--sender-burst',
    '1000000',
    '--sender-rate',
    '1000000',
  ]);
  const topics = new Topics(redis).tenant('bulk');
  const post = async (key: string, path: string, body: unknown) => {
    const response = await fetch(`${pipeline.gatewayUrl}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };

  // The other tenant's user, on a real socket; every single send is timed from its POST to the event.
  const [realtimeUrl = ''] = pipeline.realtimeUrls;
  const watcher = await pipeline.connect(realtimeUrl, 'watcher');
  const shownAt = new Map<string, number>();
  watcher.on('notification', (event: { id: string }) => shownAt.set(event.id, performance.now()));
  /** Single sends at SINGLES_PER_SECOND, for at least `seconds` and until `until()`: their latencies. */
  async function singles(
    seconds: number,
    until: () => boolean,
  ): Promise<{ latencies: number[]; refused: string }> {
    const sends: Promise<{ id: string | undefined; at: number; status: number }>[] = [];
    const from = performance.now();
    while (sends.length < seconds * SINGLES_PER_SECOND || !until()) {
      const at = performance.now();
      sends.push(
        post(API_KEY, '/notify', { userId: 'watcher', payload: { n: sends.length } }).then(
          ({ status, body }) => ({
            id: status === 202 ? (body.id as string) : undefined,
            at,
            status,
          }),
        ),
      );
      const next = from + (sends.length * 1000) / SINGLES_PER_SECOND;
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, next - performance.now())));
    }
    const sent = await Promise.all(sends);
    const accepted = sent.filter(
      (send): send is { id: string; at: number; status: number } => send.id !== undefined,
    );
    const refused = new Map<number, number>();
    for (const { status } of sent) if (status !== 202) refused.set(status, (refused.get(status) ?? 0) + 1);
    await waitFor(() => accepted.every(({ id }) => shownAt.has(id)), {
      timeoutMs: 60_000,
      what: 'single sends',
    });
    return {
      latencies: accepted.map(({ id, at }) => (shownAt.get(id) ?? Number.NaN) - at),
      // By status: a 503 is a limiter or Redis call that missed its deadline (150 ms, 800 ms).
      refused: refused.size === 0 ? '0' : [...refused].map(([status, n]) => `${n} × ${status}`).join(', '),
    };
  }

  const quiet = await singles(QUIET_SECONDS, () => true);
  const rows: string[][] = [];
  /** Per topic size: recipients/s, Redis CPU µs per recipient and each command's µs per recipient. */
  const measured: {
    size: number;
    perSecond: number;
    cpuPerRecipient: number;
    commands: Map<string, number>;
  }[] = [];
  let isolation: string[] = [];
  try {
    for (const size of SIZES) {
      const topic = `bench-${size}`;
      for (let from = 0; from < size; from += 5000) {
        const userIds = Array.from({ length: Math.min(5000, size - from) }, (_, i) => `${topic}-${from + i}`);
        await topics.subscribe(topic, userIds);
      }
      await redis.config('RESETSTAT');
      const cpuBefore = await redisCpuMicros(redis);
      const accepted = await post(bulkKey, '/notify', { topic, payload: { title: 'to everyone' } });
      if (accepted.status !== 202)
        throw new Error(`topic send: ${accepted.status} ${JSON.stringify(accepted.body)}`);
      const id = accepted.body.id as string;
      let status: Record<string, unknown> = {};
      const measureSingles = size === Math.max(...SIZES);
      const during = measureSingles ? singles(2, () => status.status === 'sent') : undefined;
      status = await waitFor(
        async () => {
          const now = (await post(bulkKey, `/notifications/${id}`, undefined)).body;
          status = now;
          return now.status === 'sent' ? now : undefined;
        },
        { timeoutMs: 600_000, intervalMs: 100, what: `the ${size} fan-out` },
      );
      const seconds = (Date.parse(status.sentAt as string) - Date.parse(status.createdAt as string)) / 1000;
      const cpuMicros = (await redisCpuMicros(redis)) - cpuBefore;
      const recipients = status.recipients as { reached: number };
      const commands = await topCommands(redis, Number.POSITIVE_INFINITY);
      const top = commands.slice(0, 4);
      measured.push({
        size,
        perSecond: recipients.reached / seconds,
        cpuPerRecipient: cpuMicros / recipients.reached,
        commands: new Map(commands.map((c) => [c.name, c.usec / recipients.reached])),
      });
      rows.push([
        size.toLocaleString('en'),
        recipients.reached.toLocaleString('en'),
        seconds.toFixed(1),
        Math.round(recipients.reached / seconds).toLocaleString('en'),
        (cpuMicros / recipients.reached).toFixed(1),
        top.map((c) => `${c.name} ${(c.usec / recipients.reached).toFixed(1)}`).join(', '),
      ]);
      if (during) {
        const busy = await during;
        isolation = [
          `| quiet (no fan-out) | ${quiet.latencies.length} | ${percentile(quiet.latencies, 50).toFixed(0)} | ${percentile(quiet.latencies, 99).toFixed(0)} | ${quiet.refused} |`,
          `| during the ${size.toLocaleString('en')}-subscriber fan-out | ${busy.latencies.length} | ${percentile(busy.latencies, 50).toFixed(0)} | ${percentile(busy.latencies, 99).toFixed(0)} | ${busy.refused} |`,
          '',
          `p99 during ÷ quiet: ${(percentile(busy.latencies, 99) / percentile(quiet.latencies, 99)).toFixed(1)}×`,
        ];
      }
    }
  } finally {
    watcher.disconnect();
    await pipeline.stop();
    redis.disconnect();
    await redisServer.dispose();
  }

  const lines = [
    `machine: ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, load average ${loadavg()
      .map((n) => n.toFixed(1))
      .join(' ')} at the end; ${Math.round((Date.now() - started) / 1000)} s in all`,
    'run: gateway, worker (fan-out concurrency 2, chunks of 500), two realtime instances, each its own process, one redis-server (no persistence); the subscribers are offline (their live messages go to no socket), so what is measured is the inbox append and the live publish per recipient',
    '',
    '| topic subscribers | reached | seconds (202 → sent) | recipients/s | Redis CPU µs per recipient | top Redis commands, µs per recipient |',
    '| --: | --: | --: | --: | --: | --- |',
    ...rows.map((row) => `| ${row.join(' | ')} |`),
    '',
    `Another tenant's single sends (${SINGLES_PER_SECOND}/s to one user on a socket.io-client), POST → shown:`,
    '',
    '| single sends | sent | p50 ms | p99 ms | refused |',
    '| --- | --: | --: | --: | --: |',
    ...isolation,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  const sizeLabel = (size: number) => `${size.toLocaleString('en')} subscribers`;
  const rateChart = writeChart('fanout-rate', {
    title: 'Topic fan-out: recipients per second by topic size (202 → sent)',
    unit: 'recipients/s (reached ÷ (sentAt − createdAt))',
    series: ['Herald topic send'],
    groups: measured.map((m) => ({ label: sizeLabel(m.size), values: [m.perSecond] })),
  });
  // The commands of the largest send's top 4 (a script's µs include the commands it calls), beside
  // Redis's whole CPU: whether the cost per recipient stays flat as the audience grows, and where it goes.
  const commandNames = [...(measured.at(-1)?.commands.keys() ?? [])].slice(0, 4);
  const redisChart = writeChart('fanout-redis', {
    title: 'Topic fan-out: Redis µs per recipient by topic size',
    unit: "µs per recipient (INFO cpu; INFO commandstats, a script's µs with the commands it calls)",
    series: ['Redis CPU (user + sys)', ...commandNames],
    groups: measured.map((m) => ({
      label: sizeLabel(m.size),
      values: [m.cpuPerRecipient, ...commandNames.map((name) => m.commands.get(name) ?? 0)],
    })),
  });
  writeReport('fanout', `${lines.join('\n')}\n\n${rateChart}\n\n${redisChart}`);
}

await main();
