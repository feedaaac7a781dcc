import Type, { type Static } from 'typebox';

/**
 * The gateway's admin API (`/admin/*`, behind `HERALD_ADMIN_KEY`): what the operator dashboard reads.
 * Every figure is read from Redis, where each gateway and realtime instance writes its own once per
 * second; the browser never talks to Redis.
 */

const Count = Type.Integer({ minimum: 0 });
const Milliseconds = Type.Union([Type.Number({ minimum: 0 }), Type.Null()], {
  description: 'Milliseconds; null when there is no sample.',
});

/** One failed notification (BullMQ's `failed` set of the notification queue). */
export const FailedJob = Type.Object({
  id: Type.String(),
  tenantId: Type.String(),
  userId: Type.String(),
  attempts: Count,
  failedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  reason: Type.String(),
});
export type FailedJob = Static<typeof FailedJob>;

/** Answer of `GET /admin/failed`: how many failed, and the newest of them. */
export const FailedJobs = Type.Object({
  count: Type.Integer({ minimum: 0, description: 'Every failed notification in the queue.' }),
  jobs: Type.Array(FailedJob, { description: 'The newest first, at most `limit`.' }),
});
export type FailedJobs = Static<typeof FailedJobs>;

/** Answer of `POST /admin/failed/:id/retry`. */
export const RetriedJob = Type.Object({
  id: Type.String(),
  status: Type.Literal('retried', { description: 'Back in the queue: a worker delivers it again.' }),
});
export type RetriedJob = Static<typeof RetriedJob>;

/** A recipient with the most rate-limit decisions in the window, and its bucket now. */
export const HotUser = Type.Object({
  tenantId: Type.String(),
  userId: Type.String(),
  decisions: Type.Integer({ minimum: 0, description: 'Rate-limit decisions in the window.' }),
  denied: Type.Integer({ minimum: 0, description: 'Of which denied (any policy).' }),
  tokens: Type.Union(
    [
      Type.Object({
        remaining: Type.Integer({ minimum: 0, description: 'Whole tokens left now.' }),
        limit: Type.Integer({ minimum: 1, description: 'The bucket’s burst.' }),
        fullInMs: Type.Integer({ minimum: 0, description: 'Until the bucket is full again.' }),
      }),
      Type.Null(),
    ],
    {
      description:
        'The recipient bucket now, read with the limiter’s peek (cost 0, with the gateway’s default recipient limits); null when Redis did not answer.',
    },
  ),
});
export type HotUser = Static<typeof HotUser>;

/** Answer of `GET /admin/snapshot` and each `snapshot` event of `GET /admin/stream`. */
export const AdminSnapshot = Type.Object({
  at: Type.String({ format: 'date-time', description: 'When the gateway read it.' }),
  windowSeconds: Type.Integer({ minimum: 1, description: 'The seconds summed below (the last minute).' }),
  traffic: Type.Object(
    {
      seconds: Type.Array(Type.Integer(), { description: 'Unix seconds, oldest first; the last complete.' }),
      allowed: Type.Array(Count),
      denied: Type.Array(Count),
      deniedByPolicy: Type.Record(Type.String(), Count, {
        description: 'Denials in the window by the policy that refused (`sender`, `recipient`, …).',
      }),
    },
    { description: 'Rate-limit decisions per second, summed over every gateway instance.' },
  ),
  hotUsers: Type.Array(HotUser, { description: 'Most denied first, then most decisions; at most 5.' }),
  queue: Type.Record(Type.String(), Count, {
    description: 'Jobs of the notification queue by state (`waiting`, `active`, `delayed`, `failed`, …).',
  }),
  failed: FailedJobs,
  realtime: Type.Array(
    Type.Object({
      instanceId: Type.String(),
      connections: Count,
      at: Type.String({ format: 'date-time', description: 'Its last heartbeat.' }),
    }),
    { description: 'Realtime instances heard from within 3 s, with their open connections.' },
  ),
  resume: Type.Object(
    {
      fresh: Type.Integer({ minimum: 0, description: 'Connections without `lastOffset` (live from now).' }),
      recovered: Type.Integer({ minimum: 0, description: 'Resumed from `lastOffset`, nothing lost.' }),
      resync: Type.Integer({ minimum: 0, description: 'Their offset was gone (trimmed): told to reload.' }),
      replayed: Type.Integer({ minimum: 0, description: 'Notifications replayed by the recoveries.' }),
    },
    { description: 'Connection outcomes on every realtime instance in the window.' },
  ),
  latency: Type.Object(
    {
      count: Type.Integer({ minimum: 0, description: 'Acknowledged live notifications in the window.' }),
      p50: Milliseconds,
      p90: Milliseconds,
      p99: Milliseconds,
      max: Milliseconds,
    },
    {
      description:
        'End-to-end delivery latency (first client ack on an instance − creation at the gateway), from per-second log-linear histograms (buckets 2^(1/4) apart: a percentile is at most 19 % high).',
    },
  ),
});
export type AdminSnapshot = Static<typeof AdminSnapshot>;
