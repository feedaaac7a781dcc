// What Herald keeps in Redis, measured: the sizing figures of docs/operations.md (Redis memory per user
// inbox, per notification, per rate-limit bucket, per connected socket). One private redis-server, the
// delivery benchmark's pipeline (a gateway, a worker, two realtime instances, each its own process):
// BENCH_USERS users connect (half on each instance), then each gets BENCH_PER_USER notifications
// through POST /notify; every key is then weighed with MEMORY USAGE (SAMPLES 0: exact) and grouped by
// its shape (ids replaced by placeholders). The peer is the payload itself: the JSON the sender posted.
import { randomUUID } from 'node:crypto';
import { startRedisServer, waitFor } from '@herald/testing';
import { Redis } from 'ioredis';
import type { Socket } from 'socket.io-client';
import { startPipeline } from '../delivery/pipeline.js';
import { writeReport } from '../report.js';

const USERS = Number(process.env.BENCH_USERS ?? 500);
const PER_USER = Number(process.env.BENCH_PER_USER ?? 20);
const SECRET = 'bench-secret-0123456789abcdef0123456789';
const API_KEY = 'bench-key-0123456789abcdef0123456789abcdef';
const PAYLOAD = {
  title: 'Your order has shipped',
  body: 'Order 1042 left the warehouse today.',
  url: '/orders/1042',
};
const payloadBytes = Buffer.byteLength(JSON.stringify(PAYLOAD));

const redis = await startRedisServer({ args: ['--appendonly', 'no'] });
const client = new Redis(redis.url);
const usedMemory = async () => Number(/used_memory:(\d+)/.exec(await client.info('memory'))?.[1]);
const pipeline = await startPipeline({
  redis,
  secret: SECRET,
  env: {
    HERALD_API_KEYS: API_KEY,
    HERALD_JWT_SECRET: SECRET,
    // Large bursts that refill slowly: every send is allowed, and no bucket is full again (and gone)
    // before it is weighed.
    HERALD_RATE_LIMIT_PER_SECOND: '1',
    HERALD_RATE_LIMIT_BURST: '100000',
    HERALD_SENDER_RATE_LIMIT_PER_SECOND: '1',
    HERALD_SENDER_RATE_LIMIT_BURST: '1000000',
  },
});
const users = Array.from({ length: USERS }, (_, i) => `mem-user-${i}`);
const sockets: Socket[] = [];
const started = Date.now();
try {
  // Connections: what the realtime servers keep in Redis per socket (slots, subscriptions).
  await waitFor(async () => (await client.dbsize()) > 0, { what: 'the apps registered' });
  const beforeSockets = await usedMemory();
  const received = new Map<string, number>();
  for (const [i, user] of users.entries()) {
    const socket = await pipeline.connect(pipeline.realtimeUrls[i % 2] as string, user);
    socket.on('notification', () => received.set(user, (received.get(user) ?? 0) + 1));
    sockets.push(socket);
  }
  const afterSockets = await usedMemory();

  // Notifications: POST /notify, 10 in flight; a 503 (Redis slow on a loaded machine) is retried after
  // its Retry-After with the same Idempotency-Key, as a sender does.
  const jobs = users.flatMap((user) => Array.from({ length: PER_USER }, () => user));
  let next = 0;
  const send = async (userId: string) => {
    const key = randomUUID();
    for (let attempt = 1; ; attempt++) {
      const response = await fetch(`${pipeline.gatewayUrl}/notify`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${API_KEY}`,
          'content-type': 'application/json',
          'idempotency-key': key,
        },
        body: JSON.stringify({ userId, payload: PAYLOAD }),
      });
      if (response.status === 202) return;
      const text = await response.text();
      if ((response.status !== 503 && response.status !== 409) || attempt === 20) {
        throw new Error(`notify: ${response.status} ${text}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  };
  await Promise.all(
    Array.from({ length: 10 }, async () => {
      while (next < jobs.length) await send(jobs[next++] as string);
    }),
  );
  await waitFor(() => users.every((user) => received.get(user) === PER_USER), {
    timeoutMs: 120_000,
    what: 'every notification on its socket',
  });

  // Every key, weighed and grouped by shape.
  const families = new Map<string, { keys: number; bytes: number }>();
  let cursor = '0';
  do {
    const [nextCursor, keys] = await client.scan(cursor, 'COUNT', 1000);
    cursor = nextCursor;
    for (const key of keys) {
      const bytes = Number(await client.memory('USAGE', key, 'SAMPLES', 0));
      const shape = key
        .replace(/mem-user-\d+/g, '<user>')
        .replace(/:n:\{[0-9a-z]{1,4}\}:/g, ':n:{<slot tag>}:')
        .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '<uuid>')
        .replace(/[0-9a-f]{64}/g, '<sha256>')
        .replace(/\b\d{10,}-\d+\b/g, '<offset>')
        .replace(/:\d+$/g, ':<n>');
      const family = families.get(shape) ?? { keys: 0, bytes: 0 };
      family.keys++;
      family.bytes += bytes;
      families.set(shape, family);
    }
  } while (cursor !== '0');

  const notifications = USERS * PER_USER;
  const rows = [...families].sort((a, b) => b[1].bytes - a[1].bytes);
  const sum = (match: (shape: string) => boolean) => {
    const chosen = rows.filter(([shape]) => match(shape));
    return {
      keys: chosen.reduce((total, [, family]) => total + family.keys, 0),
      bytes: chosen.reduce((total, [, family]) => total + family.bytes, 0),
    };
  };
  const inbox = sum((shape) => shape.startsWith('herald:inbox:'));
  const buckets = sum((shape) => shape.startsWith('ratelimit:'));
  const idempotency = sum((shape) => shape.includes(':idem:'));
  const retained = sum((shape) => /^\{herald\}:notifications:<uuid>$/.test(shape));
  const queue = sum((shape) => shape.startsWith('{herald}:') && !/<uuid>$/.test(shape));
  const kb = (bytes: number) => `${(bytes / 1024).toFixed(2)} KB`;
  const per = (total: { keys: number; bytes: number }) =>
    total.keys ? kb(total.bytes / total.keys) : 'none';
  const version = /redis_version:(\S+)/.exec(await client.info('server'))?.[1];

  const report = [
    `${USERS} users connected (half on each of 2 realtime instances), ${PER_USER} notifications each through POST /notify with an Idempotency-Key (${notifications} in all, payload ${payloadBytes} bytes of JSON), all delivered; redis-server ${version}, ${Math.round((Date.now() - started) / 1000)} s`,
    '',
    '| what | Redis memory | how long it stays | how |',
    '| --- | --: | --- | --- |',
    `| per connected socket | ${kb((afterSockets - beforeSockets) / USERS)} | while connected | used_memory before and after ${USERS} sockets connected |`,
    `| per user inbox of ${PER_USER} notifications | ${kb(inbox.bytes / USERS)} | HERALD_INBOX_MAX_LENGTH / _MAX_AGE_MS | every herald:inbox: key ÷ users |`,
    `| per notification in an inbox | ${kb(inbox.bytes / notifications)} (${(inbox.bytes / notifications / payloadBytes).toFixed(1)}× its payload) | the same | every herald:inbox: key ÷ notifications |`,
    `| per rate-limit bucket | ${per(buckets)} | until it is full again | ratelimit: keys (${buckets.keys}) |`,
    `| per request with an Idempotency-Key (its record and its epoch) | ${kb(idempotency.bytes / notifications)} | HERALD_IDEMPOTENCY_TTL_SECONDS (1 day) | :idem: keys (${idempotency.keys}) ÷ notifications |`,
    `| per completed job kept by BullMQ | ${per(retained)} | 1 hour or the last 10,000 (removeOnComplete) | {herald}:notifications:<id> hashes (${retained.keys}) |`,
    `| the queue's own keys (completed set, events stream, …) | ${kb(queue.bytes)} in all | bounded by the same | other {herald}: keys |`,
    '',
    '| key shape | keys | bytes | bytes per key |',
    '| --- | --: | --: | --: |',
    ...rows
      .slice(0, 10)
      .map(
        ([shape, family]) =>
          `| \`${shape}\` | ${family.keys} | ${family.bytes} | ${Math.round(family.bytes / family.keys)} |`,
      ),
    ...(rows.length > 10
      ? [
          `| ${rows.length - 10} more shapes | ${rows.slice(10).reduce((n, [, f]) => n + f.keys, 0)} | ${rows.slice(10).reduce((n, [, f]) => n + f.bytes, 0)} | |`,
        ]
      : []),
  ].join('\n');
  console.log(report);
  writeReport('memory', report);
} finally {
  for (const socket of sockets) socket.disconnect();
  await pipeline.stop();
  client.disconnect();
  await redis.dispose();
}
