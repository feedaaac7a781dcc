import {
  InstanceIdEnv,
  partitionShare,
  RedisWaitEnv,
  readServerEnv,
  type ServerConfig,
  ServerEnv,
} from '@herald/config';
import { InboxEnv, inboxSettings } from '@herald/inbox';
import { PushSenderEnv, type PushSettings, resolvePush, serverEnvExtras } from '@herald/push';
import { WebhookDeliveryEnv, type WebhookWorkerSettings, webhookSettings } from '@herald/webhooks';
import Type from 'typebox';

/** Every variable the worker reads (nothing else is looked at). */
export const EnvSchema = Type.Object({
  ...ServerEnv(3002),
  HERALD_WORKER_CONCURRENCY: Type.Integer({ minimum: 1, maximum: 1000, default: 50 }),
  HERALD_WORKER_LOCK_MS: Type.Integer({ minimum: 1000, maximum: 600_000, default: 10_000 }),
  HERALD_WORKER_STALLED_INTERVAL_MS: Type.Integer({ minimum: 500, maximum: 600_000, default: 5_000 }),
  HERALD_WORKER_FANOUT_CONCURRENCY: Type.Integer({ minimum: 1, maximum: 100, default: 2 }),
  HERALD_WORKER_FANOUT_CHUNK: Type.Integer({ minimum: 1, maximum: 10_000, default: 500 }),
  // The queue partitions this worker consumes: `all`, or indexes and ranges (`0-3,8`).
  HERALD_WORKER_PARTITIONS: Type.String({ default: 'all' }),
  ...InboxEnv,
  // How the worker delivers tenants' webhooks (stored under the gateway's HERALD_KEY_PREFIX).
  ...WebhookDeliveryEnv,
  ...RedisWaitEnv,
  ...PushSenderEnv,
  ...InstanceIdEnv,
});

/** The worker's settings, parsed once at start-up and frozen. */
export interface WorkerConfig extends ServerConfig {
  /**
   * `HERALD_REDIS_WAIT_REPLICAS`: replicas that must have a notification's inbox entry (`WAIT`) before it
   * is pushed live and its job completes; fewer within 1 s fails the attempt (retried). 0: the primary alone.
   */
  redisWaitReplicas: number;
  /** Channel prefix shared with the realtime servers' Redis adapter. */
  pubsubKey: string;
  /**
   * `classic`: Redis pub/sub (PUBLISH on the user's live channel); `sharded`: Redis 7 sharded pub/sub
   * (SPUBLISH), required on Redis Cluster. Realtime must use the same mode (`@herald/live`).
   */
  pubsubMode: 'classic' | 'sharded';
  /** Jobs taken at once per partition consumed (`HERALD_WORKER_CONCURRENCY`). */
  concurrency: number;
  /**
   * `HERALD_WORKER_PARTITIONS`: the queue partitions (of `HERALD_QUEUE_PARTITIONS`) this worker
   * consumes, one BullMQ worker each; all of them by default. Every partition needs a worker.
   */
  partitions: readonly number[];
  /**
   * BullMQ lock of an active job and how often stalled jobs (of a dead worker) are looked for, ms.
   * 10 s / 5 s rather than BullMQ's 30 s / 30 s: a notification whose worker died is taken over within
   * about 15 s; a job takes milliseconds, so renewing its lock every 5 s costs next to nothing.
   */
  lockMs: number;
  stalledIntervalMs: number;
  /**
   * How often the partitions of earlier `HERALD_QUEUE_PARTITIONS` counts are looked for jobs to drain, ms
   * (30 s; see `Leftovers`). Not a setting: tests shorten it.
   */
  leftoverCheckMs: number;
  /**
   * Topic sends and broadcasts: fan-out jobs taken at once per process (their own queue and slots, beside
   * `concurrency`), and recipients per chunk (one page: charged, appended, checkpointed together).
   */
  fanout: { concurrency: number; chunkSize: number };
  inbox: { prefix: string; maxLength: number; maxAgeMs: number };
  /** Delivery webhooks (`HERALD_WEBHOOK_*`; private addresses also allowed by `HERALD_DEV_MODE`). */
  webhooks: WebhookWorkerSettings;
  /** Web Push escalations (`HERALD_VAPID_*`, `HERALD_PUSH_*`): off without VAPID keys in production. */
  push: PushSettings;
  /** `HERALD_PUSH_TIMEOUT_MS`: how long one push request may take. */
  pushTimeoutMs: number;
}

/**
 * Reads the worker's configuration from `env` (default `process.env`) and nothing else; every problem
 * is named in one `ConfigError`. The worker's one secret is the VAPID private key (Web Push), checked
 * by `resolvePush`; it holds no token secret and no API key.
 */
export function loadConfig(env: Record<string, string | undefined> = process.env): WorkerConfig {
  const push = resolvePush(env, { sender: true });
  const extras = serverEnvExtras(push);
  const share = shareOf(env);
  const { values: parsed, server } = readServerEnv('worker', EnvSchema, env, undefined, {
    ...extras,
    problems: [...(extras.problems ?? []), ...(share.problem === undefined ? [] : [share.problem])],
  });
  return Object.freeze({
    ...server,
    redisWaitReplicas: parsed.HERALD_REDIS_WAIT_REPLICAS,
    pubsubKey: parsed.HERALD_PUBSUB_KEY,
    pubsubMode: parsed.HERALD_PUBSUB_MODE,
    concurrency: parsed.HERALD_WORKER_CONCURRENCY,
    partitions: Object.freeze(share.partitions ?? []),
    lockMs: parsed.HERALD_WORKER_LOCK_MS,
    stalledIntervalMs: parsed.HERALD_WORKER_STALLED_INTERVAL_MS,
    leftoverCheckMs: 30_000,
    fanout: Object.freeze({
      concurrency: parsed.HERALD_WORKER_FANOUT_CONCURRENCY,
      chunkSize: parsed.HERALD_WORKER_FANOUT_CHUNK,
    }),
    inbox: inboxSettings(parsed),
    webhooks: webhookSettings(parsed, parsed.HERALD_DEV_MODE),
    push,
    pushTimeoutMs: parsed.HERALD_PUSH_TIMEOUT_MS,
  });
}

/**
 * `HERALD_WORKER_PARTITIONS` read against `HERALD_QUEUE_PARTITIONS`: the partitions, or the problem to
 * name (an invalid `HERALD_QUEUE_PARTITIONS` is the schema's to report).
 */
function shareOf(env: Record<string, string | undefined>): { partitions?: number[]; problem?: string } {
  const raw = env.HERALD_QUEUE_PARTITIONS?.trim() ?? '';
  const count = raw === '' ? 1 : Number(raw);
  if (!Number.isInteger(count) || count < 1) return {};
  try {
    return { partitions: partitionShare(env.HERALD_WORKER_PARTITIONS ?? 'all', count) };
  } catch (error) {
    return { problem: `HERALD_WORKER_PARTITIONS: ${(error as Error).message}` };
  }
}
