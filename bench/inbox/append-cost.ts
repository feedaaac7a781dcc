// Redis CPU per notification of the inbox append script (packages/inbox/src/append-n.lua) against the
// script before the append-slim change (append-n.before.lua beside this file, kept for this comparison
// only), side by side on one private redis-server: INFO commandstats usec of EVALSHA over the
// notifications appended, for K notifications per call over USERS users with a ~300-byte JSON payload.
// Two inbox states: "growing" (below maxLength: nothing trimmed) and "full" (at maxLength: every append
// trims the oldest entry). The scripts take turns ROUNDS times; the table shows the median of the rounds
// and the ratio new / before. Prints a table; writes no README section.
//
//   cd bench && npx tsx inbox/append-cost.ts   (BENCH_ROUNDS=5, BENCH_NOTIFICATIONS=3000; ~1 min)
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { inboxKeys, notificationIndexKey } from '@herald/inbox';
import { startRedisServer } from '@herald/testing';
import { Redis } from 'ioredis';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const NOTIFICATIONS = Number(process.env.BENCH_NOTIFICATIONS ?? 3000);
const USERS = 300;
const BATCHES = [1, 5, 20] as const;
/** Entries each user's inbox holds before a run (the "full" state keeps exactly this many). */
const PREFILL = 50;
const RETENTION_MS = 31 * 24 * 3600 * 1000;
const MAX_AGE_MS = 30 * 24 * 3600 * 1000;

const scripts = {
  before: readFileSync(new URL('./append-n.before.lua', import.meta.url), 'utf8'),
  new: readFileSync(new URL('../../packages/inbox/src/append-n.lua', import.meta.url), 'utf8'),
};
type Version = keyof typeof scripts;

/** A notification as the worker stores it: ~300 bytes of JSON. */
function notification(userId: string) {
  const id = randomUUID();
  return {
    id,
    json: JSON.stringify({
      id,
      userId,
      tenantId: 'acme',
      type: 'comment',
      topic: 'project-42',
      payload: {
        title: 'Ada commented on "Quarterly plan"',
        body: 'Looks good to me, but can we move the review to Thursday? The numbers for March are not in yet.',
        url: 'https://app.example.com/projects/42/docs/7#comment-1234',
      },
      createdAt: new Date().toISOString(),
    }),
  };
}

/** KEYS and ARGV (after count and now) of one notification, as Inbox.append builds them. */
function call(prefix: string, userId: string, maxLength: number): { keys: string[]; args: string[] } {
  const keys = inboxKeys(prefix, userId);
  const { id, json } = notification(userId);
  return {
    keys: [
      keys.stream,
      keys.meta,
      keys.unread,
      keys.marker(id),
      keys.dedupe(''),
      keys.mutes,
      notificationIndexKey(prefix, id),
    ],
    args: [
      id,
      json,
      '0',
      '0',
      String(maxLength),
      String(MAX_AGE_MS),
      String(RETENTION_MS),
      'acme',
      'topic:project-42',
      'type:comment',
      userId,
    ],
  };
}

async function append(redis: Redis, sha: string, calls: { keys: string[]; args: string[] }[]) {
  const keys = calls.flatMap((c) => c.keys);
  const args = calls.flatMap((c) => c.args);
  await redis.evalsha(sha, keys.length, ...keys, calls.length, '', ...args);
}

async function evalshaUsec(redis: Redis): Promise<number> {
  const info = await redis.info('commandstats');
  const line = info.split('\r\n').find((l) => l.startsWith('cmdstat_evalsha:'));
  return Number(/usec=(\d+)/.exec(line ?? '')?.[1] ?? 0);
}

/** µs of Redis per notification for one script, state and K, on fresh keys. */
async function measure(redis: Redis, sha: string, state: 'growing' | 'full', k: number): Promise<number> {
  const prefix = `bench:${randomUUID().slice(0, 8)}:`;
  const users = Array.from({ length: USERS }, (_, i) => `user-${i}`);
  const maxLength = state === 'full' ? PREFILL : 100_000;
  // Prefill with the script being measured (its own cached state, as after a deploy has settled).
  for (let i = 0; i < PREFILL; i++) {
    for (let u = 0; u < USERS; u += 20) {
      await append(
        redis,
        sha,
        users.slice(u, u + 20).map((user) => call(prefix, user, maxLength)),
      );
    }
  }
  await redis.config('RESETSTAT');
  const pending: Promise<void>[] = [];
  for (let sent = 0; sent < NOTIFICATIONS; sent += k) {
    const batch = Array.from({ length: k }, () =>
      call(prefix, users[Math.floor(Math.random() * USERS)] ?? 'user-0', maxLength),
    );
    pending.push(append(redis, sha, batch));
    if (pending.length >= 16) await Promise.all(pending.splice(0));
  }
  await Promise.all(pending);
  const usec = await evalshaUsec(redis);
  await redis.flushall();
  return usec / (Math.ceil(NOTIFICATIONS / k) * k);
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;

const server = await startRedisServer();
const redis = new Redis(server.url);
try {
  const version = (await redis.info('server')).match(/redis_version:(\S+)/)?.[1];
  const shas = {} as Record<Version, string>;
  for (const name of Object.keys(scripts) as Version[]) {
    shas[name] = (await redis.script('LOAD', scripts[name])) as string;
  }
  console.log(
    `Inbox append, Redis µs per notification (EVALSHA usec / notifications), Redis ${version}, ` +
      `${USERS} users, ${NOTIFICATIONS} notifications per run, median of ${ROUNDS} rounds`,
  );
  const rows: string[][] = [];
  for (const state of ['growing', 'full'] as const) {
    for (const k of BATCHES) {
      const samples: Record<Version, number[]> = { before: [], new: [] };
      for (let round = 0; round < ROUNDS; round++) {
        for (const name of round % 2 === 0 ? (['before', 'new'] as const) : (['new', 'before'] as const)) {
          samples[name].push(await measure(redis, shas[name], state, k));
        }
      }
      const before = median(samples.before);
      const after = median(samples.new);
      rows.push([state, String(k), before.toFixed(1), after.toFixed(1), `${(after / before).toFixed(2)}x`]);
    }
  }
  const header = ['inbox', 'K per call', 'before µs', 'new µs', 'new / before'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join(' | ')} |`;
  console.log(line(header));
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const row of rows) console.log(line(row));
} finally {
  redis.disconnect();
  await server.dispose();
}
