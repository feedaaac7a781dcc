// How realtime subscribes to live messages, three designs side by side on a private redis-server:
// - per user: each instance SUBSCRIBEs the channels of its own users (what @herald/live does);
// - pattern: each instance PSUBSCRIBEs `<key>:live:*` and drops the users it does not hold;
// - shards: users hashed over 16 channels, each instance SUBSCRIBEs all 16 and drops the rest.
// Two subscriber connections (two instances) of USERS/2 users each; one publisher sends MESSAGES
// messages round-robin over the users, 64 in flight. Reported: messages read by the instances per
// message sent (network + decode work on the realtime side), Redis CPU per publish (INFO commandstats),
// and the wall time of the send. Not part of the test suite.
//
// Usage: pnpm --filter @herald/bench exec tsx delivery/channels.ts   (BENCH_USERS=1000, BENCH_MESSAGES=100000)
import { liveChannel, livePublisher } from '@herald/live';
import { startRedisServer } from '@herald/testing';
import { Redis } from 'ioredis';

const USERS = Number(process.env.BENCH_USERS ?? 1000);
const MESSAGES = Number(process.env.BENCH_MESSAGES ?? 100_000);
const SHARDS = 16;
const KEY = 'bench';

type Design = 'per user' | 'pattern' | 'shards';

async function measure(url: string, design: Design): Promise<string[]> {
  const admin = new Redis(url);
  const instances = [new Redis(url), new Redis(url)];
  const users = Array.from({ length: USERS }, (_, i) => `user-${i}`);
  const shardOf = (i: number) => `${KEY}:shard:${i % SHARDS}`;
  let read = 0;
  let delivered = 0;
  const held = instances.map((_, k) => new Set(users.filter((_, i) => i % 2 === k)));
  await Promise.all(
    instances.map(async (sub, k) => {
      const mine = held[k] as Set<string>;
      const onMessage = (channel: string, text: string) => {
        read++;
        const message = JSON.parse(text) as { userId: string };
        if (mine.has(message.userId)) delivered++;
        void channel;
      };
      if (design === 'per user') {
        sub.on('message', onMessage);
        for (const user of mine) await sub.subscribe(liveChannel(KEY, 'default', user));
      } else if (design === 'pattern') {
        sub.on('pmessage', (_pattern: string, channel: string, text: string) => onMessage(channel, text));
        await sub.psubscribe(`${KEY}:live:*`);
      } else {
        sub.on('message', onMessage);
        await sub.subscribe(...Array.from({ length: SHARDS }, (_, i) => shardOf(i)));
      }
    }),
  );
  await admin.config('RESETSTAT');
  const pub = new Redis(url);
  const live = livePublisher(pub, { key: KEY, mode: 'classic' });
  const started = performance.now();
  for (let i = 0; i < MESSAGES; i += 64) {
    const batch: Promise<unknown>[] = [];
    for (let j = i; j < Math.min(MESSAGES, i + 64); j++) {
      const userId = users[j % USERS] as string;
      const event = { id: `n${j}`, offset: `1-${j + 1}`, userId, payload: {}, createdAt: '' };
      if (design === 'shards') {
        batch.push(
          pub.publish(
            shardOf(j % USERS),
            JSON.stringify({ v: 1, kind: 'notification', tenantId: 'default', userId, event }),
          ),
        );
      } else {
        live.notification('default', event);
      }
    }
    batch.push(pub.ping());
    await Promise.all(batch);
  }
  const sendMs = performance.now() - started;
  while (delivered < MESSAGES) await new Promise((resolve) => setTimeout(resolve, 10));
  const stats = (await admin.info('commandstats')).match(
    /cmdstat_publish:calls=\d+,usec=\d+,usec_per_call=([\d.]+)/,
  );
  for (const redis of [admin, pub, ...instances]) redis.disconnect();
  return [
    design,
    (read / MESSAGES).toFixed(2),
    stats?.[1] ?? '-',
    Math.round(MESSAGES / (sendMs / 1000)).toLocaleString('en-US'),
  ];
}

const redis = await startRedisServer({ args: ['--appendonly', 'no'] });
try {
  const rows: string[][] = [];
  // Three rounds in rotated order (the machine is shared); the median of each figure.
  const designs: Design[] = ['per user', 'pattern', 'shards'];
  const results = new Map<Design, string[][]>(designs.map((d) => [d, []]));
  for (let round = 0; round < 3; round++) {
    for (let k = 0; k < designs.length; k++) {
      const design = designs[(k + round) % designs.length] as Design;
      results.get(design)?.push(await measure(redis.url, design));
    }
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
  for (const design of designs) {
    const r = results.get(design) ?? [];
    rows.push([
      design,
      median(r.map((x) => Number(x[1]))).toFixed(2),
      median(r.map((x) => Number(x[2]))).toFixed(2),
      median(r.map((x) => Number(String(x[3]).replaceAll(',', '')))).toLocaleString('en-US'),
    ]);
  }
  process.stdout.write(
    [
      `${USERS} users over 2 instances, ${MESSAGES} messages, median of 3 rounds`,
      '',
      '| subscription design | messages read by the instances per message | Redis µs per PUBLISH | publishes/s |',
      '| --- | --: | --: | --: |',
      ...rows.map((r) => `| ${r.join(' | ')} |`),
      '',
    ].join('\n'),
  );
} finally {
  await redis.dispose();
}
