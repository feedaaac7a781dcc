// Redis CPU per notification of the inbox append script (packages/inbox/src/append-n.lua) of the working
// tree against the script at BENCH_BASE (default main; read from git; or the file BENCH_BEFORE_FILE): a
// tool for a change to the script, as bench:limiter-scripts is for the limiter's, side by side on two
// private redis-servers taking turns every 16 calls (which is sent to first alternating, and the servers
// swapped every round: the same script on both measured up to ~10 % apart per call otherwise): INFO commandstats usec of EVALSHA over the notifications
// appended, for K notifications per call over USERS users with a ~300-byte JSON payload. Three
// workloads: "growing" (below maxLength: nothing trimmed) and "full" (at maxLength: every append trims
// the oldest entry), each call's K notifications for K users drawn at random; "one user" (growing, the K
// notifications of a call all for one user: a burst, or an envelope to one user). The table shows the
// median of ROUNDS runs and the ratio new / before; printed only (bench:cost's breakdown is where the
// report shows what the append costs end to end).
//
//   npx pnpm@12.4.2 bench:inbox-append   (BENCH_ROUNDS=6, BENCH_NOTIFICATIONS=3000; ~4 min)
// BENCH_CALLGRIND=1 counts the instructions of Redis's main thread under valgrind instead of timing:
// a count, which the machine's load does not move (BENCH_NOTIFICATIONS=960, one round; ~8 min).
// To try a variant without editing the script: BENCH_NEW_FILE (the "new" script's file), BENCH_STATES
// ("growing,full,one user") and BENCH_BATCHES ("1,5,20") to measure only some rows, BENCH_KEEP=1 to keep
// callgrind's output (for callgrind_annotate; its folders are printed).
// BENCH_ROUTED=1 (with BENCH_BASE before routed ids, e.g. bd24090): the new script's calls carry routed
// ids, as the gateway sends since then, the old one's random ids and their id index.
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inboxKeys, notificationIdFor, notificationIndexKey } from '@herald/inbox';
import { type RedisServerHandle, startRedisServer } from '@herald/testing';
import { Redis } from 'ioredis';

const CALLGRIND = process.env.BENCH_CALLGRIND === '1';
/** The new script's calls with routed ids (packages/inbox keys.ts: no id index), the old one's without. */
const ROUTED = process.env.BENCH_ROUTED === '1';
const BASE = process.env.BENCH_BASE ?? 'main';
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? (CALLGRIND ? 1 : 6));
const NOTIFICATIONS = Number(process.env.BENCH_NOTIFICATIONS ?? (CALLGRIND ? 960 : 3000));
const USERS = 300;
const BATCHES = (process.env.BENCH_BATCHES ?? '1,5,20').split(',').map(Number);
/** Entries each user's inbox holds before a run (the "full" state keeps exactly this many). */
const PREFILL = CALLGRIND ? 20 : 50;
const RETENTION_MS = 31 * 24 * 3600 * 1000;
const MAX_AGE_MS = 30 * 24 * 3600 * 1000;

const scripts = {
  // The script at BENCH_BASE, from git.
  before: process.env.BENCH_BEFORE_FILE
    ? readFileSync(process.env.BENCH_BEFORE_FILE, 'utf8')
    : execFileSync('git', ['show', `${BASE}:packages/inbox/src/append-n.lua`], { encoding: 'utf8' }),
  new: readFileSync(
    process.env.BENCH_NEW_FILE ?? new URL('../../packages/inbox/src/append-n.lua', import.meta.url),
    'utf8',
  ),
};
type Version = keyof typeof scripts;
/** growing: below maxLength; full: at it (every append trims one); one user: growing, a call's K all one user's. */
const STATES = ['growing', 'full', 'one user'] as const;
type State = (typeof STATES)[number];
const VERSIONS = ['before', 'new'] as const;

/** A notification as the worker stores it: ~300 bytes of JSON. */
function notification(userId: string, id: string = randomUUID()) {
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

/**
 * KEYS and ARGV (after count and now) of one notification, as Inbox.append builds them: with a random id
 * and its id index, or (`routed`) a routed id, whose marker names its user and needs no index.
 */
function call(
  prefix: string,
  userId: string,
  maxLength: number,
  routed = false,
  twelve = false,
): { keys: string[]; args: string[] } {
  const keys = inboxKeys(prefix, userId);
  const { id, json } = notification(userId, routed ? notificationIdFor(userId) : undefined);
  return {
    keys: [
      keys.stream,
      keys.meta,
      keys.unread,
      keys.marker(id),
      keys.dedupe(''),
      keys.mutes,
      routed ? (twelve ? keys.legacyMarker(id) : keys.marker(id)) : notificationIndexKey(prefix, id),
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
      // The script's 12th argument per notification (since routed ids kept a fallback), when it has one.
      ...(twelve ? [routed ? '1' : '0'] : []),
    ],
  };
}

interface Server {
  redis: Redis;
  sha: string;
  handle: RedisServerHandle;
  /** BENCH_ROUTED=1, the new script: its calls carry routed ids (no id index). */
  routed: boolean;
  /** The script takes 12 arguments per notification (a routed flag), not 11. */
  twelve: boolean;
  /** BENCH_CALLGRIND=1: callgrind's output folder. */
  out?: string;
}

/** callgrind_control `option` on the server's valgrind process. */
function control(server: Server, option: string): void {
  execFileSync('callgrind_control', [option, String(server.handle.process.pid)], { stdio: 'pipe' });
}

/** Instructions of the server's main thread since its last `-z` (callgrind's last dump). */
function instructions(server: Server): number {
  control(server, '-d');
  const dumps = readdirSync(server.out ?? '')
    .filter((file) => /^cg\.\d+\.\d+$/.test(file))
    .sort((a, b) => Number(a.split('.').pop()) - Number(b.split('.').pop()));
  const totals = /^totals: (\d+)/m.exec(readFileSync(join(server.out ?? '', dumps.at(-1) ?? ''), 'utf8'));
  return Number(totals?.[1] ?? Number.NaN);
}

async function append(server: Server, calls: { keys: string[]; args: string[] }[]) {
  const keys = calls.flatMap((c) => c.keys);
  const args = calls.flatMap((c) => c.args);
  await server.redis.evalsha(server.sha, keys.length, ...keys, calls.length, '', ...args);
}

async function evalshaUsec(redis: Redis): Promise<number> {
  const info = await redis.info('commandstats');
  const line = info.split('\r\n').find((l) => l.startsWith('cmdstat_evalsha:'));
  return Number(/usec=(\d+)/.exec(line ?? '')?.[1] ?? 0);
}

/**
 * µs of Redis per notification of each script for one state and K, on fresh keys: each script on its own
 * redis-server, taking turns every 16 calls (16 in flight), so that whatever else the machine does slows
 * both alike.
 */
async function measure(servers: Record<Version, Server>, state: State, k: number) {
  const prefix = `bench:${randomUUID().slice(0, 8)}:`;
  const users = Array.from({ length: USERS }, (_, i) => `user-${i}`);
  const maxLength = state === 'full' ? PREFILL : 100_000;
  // Each time in the other order: the server sent to first works while this process still builds the
  // other's calls, which measured up to ~10 % per call apart with the same script on both.
  let turn = 0;
  const both = (work: (server: Server) => Promise<unknown>) => {
    const order = turn++ % 2 === 0 ? VERSIONS : ([...VERSIONS].reverse() as Version[]);
    return Promise.all(order.map((name) => work(servers[name])));
  };
  // Prefill with the script being measured (its own cached state, as after a deploy has settled).
  for (let i = 0; i < PREFILL; i++) {
    for (let u = 0; u < USERS; u += 20) {
      const group = users.slice(u, u + 20);
      await both((s) =>
        append(
          s,
          group.map((user) => call(prefix, user, maxLength, s.routed, s.twelve)),
        ),
      );
    }
  }
  await both((s) => s.redis.config('RESETSTAT'));
  if (CALLGRIND) for (const name of VERSIONS) control(servers[name], '-z');
  for (let sent = 0; sent < NOTIFICATIONS; sent += 16 * k) {
    const batches = Array.from({ length: 16 }, () => {
      const one = users[Math.floor(Math.random() * USERS)] ?? 'user-0';
      return Array.from({ length: k }, () =>
        state === 'one user' ? one : (users[Math.floor(Math.random() * USERS)] ?? 'user-0'),
      );
    });
    await both((s) =>
      Promise.all(
        batches.map((b) =>
          append(
            s,
            b.map((user) => call(prefix, user, maxLength, s.routed, s.twelve)),
          ),
        ),
      ),
    );
  }
  const notifications = Math.ceil(NOTIFICATIONS / (16 * k)) * 16 * k;
  const usec = CALLGRIND
    ? VERSIONS.map((name) => instructions(servers[name]))
    : await Promise.all(VERSIONS.map((name) => evalshaUsec(servers[name].redis)));
  await both((s) => s.redis.flushall());
  return { before: (usec[0] ?? 0) / notifications, new: (usec[1] ?? 0) / notifications };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;

const outs = VERSIONS.map(() =>
  CALLGRIND ? mkdtempSync(join(tmpdir(), 'herald-bench-callgrind-')) : undefined,
);
const handles = await Promise.all(
  outs.map((out) =>
    startRedisServer(
      out === undefined
        ? {}
        : {
            wrapper: ['valgrind', '--tool=callgrind', `--callgrind-out-file=${out}/cg.%p`],
            startTimeoutMs: 120_000,
          },
    ),
  ),
);
// Both scripts on both servers: the rounds swap which server runs which (two redis-servers of one
// machine differ by up to ~10 % per call, measured with the same script on both), so that neither script
// has the faster one throughout.
const slots: (Omit<Server, 'sha'> & { shas: Record<Version, string> })[] = [];
/** The server each version runs on in round `round` (swapped every round; callgrind counts need no swap). */
const serversOf = (round: number): Record<Version, Server> => {
  const swap = !CALLGRIND && round % 2 === 1;
  const pick = (version: Version, index: number): Server => {
    const slot = slots[swap ? 1 - index : index] as (typeof slots)[number];
    return {
      redis: slot.redis,
      handle: slot.handle,
      sha: slot.shas[version],
      routed: ROUTED && version === 'new',
      twelve: scripts[version].includes('then 12 per notification'),
      ...(slot.out ? { out: slot.out } : {}),
    };
  };
  return { before: pick('before', 0), new: pick('new', 1) };
};
try {
  for (const [i] of VERSIONS.entries()) {
    const handle = handles[i] as RedisServerHandle;
    const redis = new Redis(handle.url);
    const shas = {} as Record<Version, string>;
    for (const name of VERSIONS) shas[name] = (await redis.script('LOAD', scripts[name])) as string;
    slots.push({ redis, shas, handle, ...(outs[i] === undefined ? {} : { out: outs[i] }) });
  }
  const version = (await slots[0]?.redis.info('server'))?.match(/redis_version:(\S+)/)?.[1];
  const unit = CALLGRIND ? 'instructions' : 'µs';
  const title = CALLGRIND
    ? `Inbox append, instructions of Redis's main thread per notification (callgrind; reading and ` +
      `answering the calls included), Redis ${version}, ${USERS} users, ${NOTIFICATIONS} notifications per run; before = the script at ${BASE}`
    : `Inbox append, Redis µs per notification (EVALSHA usec / notifications), Redis ${version}, ` +
      `${USERS} users, ${NOTIFICATIONS} notifications per run, median of ${ROUNDS} rounds; before = the script at ${BASE}`;
  console.log(title);
  const rows: string[][] = [];
  const states = process.env.BENCH_STATES?.split(',') ?? STATES;
  for (const state of states as State[]) {
    for (const k of BATCHES) {
      const samples: Record<Version, number[]> = { before: [], new: [] };
      for (let round = 0; round < ROUNDS; round++) {
        const sample = await measure(serversOf(round), state, k);
        samples.before.push(sample.before);
        samples.new.push(sample.new);
      }
      const before = median(samples.before);
      const after = median(samples.new);
      const digits = CALLGRIND ? 0 : 1;
      rows.push([
        state,
        String(k),
        before.toFixed(digits),
        after.toFixed(digits),
        `${(after / before).toFixed(2)}x`,
      ]);
    }
  }
  const header = ['inbox', 'K per call', `before ${unit}`, `new ${unit}`, 'new / before'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join(' | ')} |`;
  const table = [
    line(header),
    `|${widths.map((w, i) => (i < 2 ? '-'.repeat(w + 2) : `${'-'.repeat(w + 1)}:`)).join('|')}|`,
    ...rows.map(line),
  ];
  console.log(table.join('\n'));
} finally {
  for (const slot of slots) slot.redis.disconnect();
  await Promise.all(handles.map((handle) => handle.dispose()));
  if (process.env.BENCH_KEEP === '1') console.log(`callgrind output kept in ${outs.join(', ')}`);
  else for (const out of outs) if (out !== undefined) rmSync(out, { recursive: true, force: true });
}
