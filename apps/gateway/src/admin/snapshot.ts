import {
  INSTANCE_STALE_MS,
  jobCountsOf,
  latencySummary,
  STATS_WINDOW_SECONDS,
  type StatsKeys,
} from '@herald/config';
import type { AdminSnapshot, HotUser, NotificationJob } from '@herald/protocol';
import type { PolicyState } from '@herald/rate-limiter';
import type { Queue } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import { failedJobs } from './failed.js';

/** Hot users in a snapshot, and failed jobs listed. */
export const HOT_USERS_SHOWN = 5;
export const FAILED_JOBS_SHOWN = 20;

/** The queue states a snapshot counts. */
const QUEUE_STATES = [
  'waiting',
  'prioritized',
  'active',
  'delayed',
  'waiting-children',
  'completed',
  'failed',
] as const;

/** Where a snapshot reads from. */
export interface SnapshotSources {
  redis: Redis | Cluster;
  /** The notification queue's partitions (their counts and failed jobs are summed). */
  queues: readonly Queue<NotificationJob>[];
  keys: StatsKeys;
  /** The recipient bucket of `<tenant>/<user>` now, without taking a token (the limiter's peek). */
  peekRecipient: (recipient: string) => Promise<PolicyState | undefined>;
}

type Fields = Record<string, string>;

/**
 * Everything the dashboard shows, read from Redis: the last {@link STATS_WINDOW_SECONDS} complete
 * seconds of every gateway's and realtime instance's per-second figures, the live realtime
 * heartbeats, the hottest recipients' buckets (peeked), queue counts and the newest failed jobs. Two
 * pipelined round trips plus the queue's and the peeks' own commands; nothing is written.
 *
 * @example
 * ```ts
 * const snapshot = await readSnapshot({ redis, queues, keys, peekRecipient });
 * ```
 */
export async function readSnapshot(sources: SnapshotSources, now = Date.now()): Promise<AdminSnapshot> {
  const { redis, keys } = sources;
  const last = Math.floor(now / 1000) - 1;
  const seconds = Array.from({ length: STATS_WINDOW_SECONDS }, (_, i) => last - STATS_WINDOW_SECONDS + 1 + i);

  const pipeline = redis.pipeline();
  for (const second of seconds) pipeline.hgetall(keys.traffic(second));
  for (const second of seconds) pipeline.hgetall(keys.delivery(second));
  pipeline.call('ZUNION', seconds.length, ...seconds.map((second) => keys.hot(second)), 'WITHSCORES');
  pipeline.call('ZUNION', seconds.length, ...seconds.map((second) => keys.hotDenied(second)), 'WITHSCORES');
  pipeline.zrangebyscore(keys.instances, now - INSTANCE_STALE_MS, '+inf');
  const [replies, queue, failed] = await Promise.all([
    pipeline.exec(),
    jobCountsOf(sources.queues, ...QUEUE_STATES),
    failedJobs(sources.queues, FAILED_JOBS_SHOWN),
  ]);
  const values = (replies ?? []).map(([error, value]: [Error | null, unknown]) => {
    if (error) throw error;
    return value;
  });
  const traffic = values.slice(0, seconds.length) as Fields[];
  const delivery = values.slice(seconds.length, 2 * seconds.length) as Fields[];
  const [hot, hotDenied, instanceIds] = values.slice(2 * seconds.length) as [string[], string[], string[]];

  const [hotUsers, realtime] = await Promise.all([
    hotUsersOf(scores(hot), scores(hotDenied), sources.peekRecipient),
    instancesOf(redis, keys, instanceIds),
  ]);
  const deniedByPolicy: Record<string, number> = {};
  for (const fields of traffic) {
    for (const [field, value] of Object.entries(fields)) {
      if (field.startsWith('denied:')) {
        const policy = field.slice('denied:'.length);
        deniedByPolicy[policy] = (deniedByPolicy[policy] ?? 0) + Number(value);
      }
    }
  }
  return {
    at: new Date(now).toISOString(),
    windowSeconds: STATS_WINDOW_SECONDS,
    traffic: {
      seconds,
      allowed: traffic.map((fields) => Number(fields.allowed ?? 0)),
      denied: traffic.map((fields) => Number(fields.denied ?? 0)),
      deniedByPolicy,
    },
    hotUsers,
    queue: Object.fromEntries(QUEUE_STATES.map((state) => [state, queue[state] ?? 0])),
    failed,
    realtime,
    ...deliveryOf(delivery),
  };
}

/** `[member, score, member, score, …]` (WITHSCORES) as a map. */
function scores(flat: readonly string[]): Map<string, number> {
  const map = new Map<string, number>();
  for (let i = 0; i + 1 < flat.length; i += 2) map.set(flat[i] as string, Number(flat[i + 1]));
  return map;
}

async function hotUsersOf(
  decisions: ReadonlyMap<string, number>,
  denied: ReadonlyMap<string, number>,
  peek: SnapshotSources['peekRecipient'],
): Promise<HotUser[]> {
  const ranked = [...decisions.keys()]
    .map((recipient) => ({
      recipient,
      decisions: decisions.get(recipient) ?? 0,
      denied: denied.get(recipient) ?? 0,
    }))
    .sort((a, b) => b.denied - a.denied || b.decisions - a.decisions)
    .slice(0, HOT_USERS_SHOWN);
  return Promise.all(
    ranked.map(async ({ recipient, decisions: count, denied: refused }) => {
      // `<tenant>/<user>`: a tenant id never contains `/` (userKey in @herald/protocol).
      const slash = recipient.indexOf('/');
      const state = await peek(recipient).catch(() => undefined);
      return {
        tenantId: recipient.slice(0, slash),
        userId: recipient.slice(slash + 1),
        decisions: count,
        denied: refused,
        tokens: state
          ? { remaining: state.remaining, limit: state.limit, fullInMs: Math.ceil(state.resetAfterMs) }
          : null,
      };
    }),
  );
}

async function instancesOf(
  redis: Redis | Cluster,
  keys: StatsKeys,
  ids: readonly string[],
): Promise<AdminSnapshot['realtime']> {
  if (ids.length === 0) return [];
  const beats = await redis.mget(ids.map((id) => keys.instance(id)));
  return ids
    .flatMap((instanceId, index) => {
      const raw = beats[index];
      if (!raw) return [];
      try {
        const beat = JSON.parse(raw) as { connections?: unknown; at?: unknown };
        if (typeof beat.connections !== 'number' || typeof beat.at !== 'number') return [];
        return [{ instanceId, connections: beat.connections, at: new Date(beat.at).toISOString() }];
      } catch {
        return [];
      }
    })
    .sort((a, b) => a.instanceId.localeCompare(b.instanceId));
}

function deliveryOf(seconds: readonly Fields[]): Pick<AdminSnapshot, 'resume' | 'latency'> {
  const resume = { fresh: 0, recovered: 0, resync: 0, replayed: 0 };
  const buckets = new Map<number, number>();
  for (const fields of seconds) {
    for (const [field, value] of Object.entries(fields)) {
      if (field.startsWith('lat:')) {
        const bucket = Number(field.slice('lat:'.length));
        buckets.set(bucket, (buckets.get(bucket) ?? 0) + Number(value));
      } else if (field in resume) resume[field as keyof typeof resume] += Number(value);
    }
  }
  return { resume, latency: latencySummary(buckets) };
}
