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
    HERALD_RATE_LIMIT_PER_SECOND: '100000',
    HERALD_RATE_LIMIT_BURST: '100000',
    HERALD_SENDER_RATE_LIMIT_PER_SECOND: '1000000',
    HERALD_SENDER_RATE_LIMIT_BURST: '1000000',
    HERALD_LOG_LEVEL: 'warn',
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

  // Notifications: POST /notify, 20 in flight.
  const jobs = users.flatMap((user) => Array.from({ length: PER_USER }, () => user));
  let next = 0;
  await Promise.all(
    Array.from({ length: 20 }, async () => {
      while (next < jobs.length) {
        const userId = jobs[next++] as string;
        const response = await fetch(`${pipeline.gatewayUrl}/notify`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${API_KEY}`,
            'content-type': 'application/json',
            'idempotency-key': randomUUID(),
          },
          body: JSON.stringify({ userId, payload: PAYLOAD }),
        });
        if (response.status !== 202) throw new Error(`notify: ${response.status} ${await response.text()}`);
      }
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
        .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '<uuid>')
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
  const perUser = rows.filter(([shape]) => shape.includes('<user>'));
  const perUserBytes = perUser.reduce((sum, [, family]) => sum + family.bytes, 0);
  const rest = rows.filter(([shape]) => !shape.includes('<user>'));
  const restBytes = rest.reduce((sum, [, family]) => sum + family.bytes, 0);
  const buckets = rows.filter(([shape]) => shape.startsWith('ratelimit:') && shape.includes('<user>'));
  const bucketKeys = buckets.reduce((sum, [, family]) => sum + family.keys, 0);
  const bucketBytes = buckets.reduce((sum, [, family]) => sum + family.bytes, 0);
  const inbox = perUser.filter(([shape]) => shape.startsWith('herald:inbox:'));
  const inboxBytes = inbox.reduce((sum, [, family]) => sum + family.bytes, 0);
  const kb = (bytes: number) => `${(bytes / 1024).toFixed(2)} KB`;

  const report = [
    `${USERS} users connected (half on each of 2 realtime instances), ${PER_USER} notifications each through POST /notify (${notifications} in all, payload ${payloadBytes} bytes of JSON); redis-server ${(await client.info('server')).match(/redis_version:(\S+)/)?.[1]}, ${Math.round((Date.now() - started) / 1000)} s`,
    '',
    '| what | Redis memory | how |',
    '| --- | --: | --- |',
    `| per connected socket | ${kb((afterSockets - beforeSockets) / USERS)} | used_memory before and after ${USERS} sockets connected |`,
    `| per user inbox of ${PER_USER} notifications | ${kb(inboxBytes / USERS)} | MEMORY USAGE of the user's herald:inbox: keys |`,
    `| per notification in an inbox | ${kb(inboxBytes / notifications)} (${(inboxBytes / notifications / payloadBytes).toFixed(1)}× its payload) | the same ÷ notifications |`,
    `| per rate-limit bucket | ${bucketKeys ? kb(bucketBytes / bucketKeys) : 'none found'} | MEMORY USAGE of the ratelimit: keys that name a user (${bucketKeys} keys) |`,
    `| everything per user (inbox, buckets, idempotency, statuses…) | ${kb(perUserBytes / USERS)} | every key that names a user |`,
    `| everything else (queue, jobs, keys, stats) | ${kb(restBytes)} in all, ${kb(restBytes / notifications)} per notification | keys that name no user |`,
    '',
    '| key shape | keys | bytes | bytes per key |',
    '| --- | --: | --: | --: |',
    ...rows
      .slice(0, 25)
      .map(
        ([shape, family]) =>
          `| \`${shape}\` | ${family.keys} | ${family.bytes} | ${Math.round(family.bytes / family.keys)} |`,
      ),
  ].join('\n');
  console.log(report);
  writeReport('memory', report);
} finally {
  for (const socket of sockets) socket.disconnect();
  await pipeline.stop();
  client.disconnect();
  await redis.dispose();
}
