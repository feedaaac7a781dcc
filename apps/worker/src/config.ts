import { hostname } from 'node:os';
import {
  clusterNodes,
  type DeploymentSettings,
  DevModeEnv,
  LogEnv,
  type LogSettings,
  logSettings,
  PubSubEnv,
  QueueEnv,
  RedisWaitEnv,
  readEnv,
  ServerEnv,
} from '@herald/config';
import { InboxEnv, inboxSettings } from '@herald/inbox';
import { PushSenderEnv, type PushSettings, resolvePush } from '@herald/push';
import { WebhookDeliveryEnv, type WebhookWorkerSettings, webhookSettings } from '@herald/webhooks';
import Type from 'typebox';

/** Every variable the worker reads (nothing else is looked at). */
export const EnvSchema = Type.Object({
  ...ServerEnv(3002),
  ...QueueEnv,
  ...PubSubEnv,
  HERALD_WORKER_CONCURRENCY: Type.Integer({ minimum: 1, maximum: 1000, default: 50 }),
  HERALD_WORKER_LOCK_MS: Type.Integer({ minimum: 1000, maximum: 600_000, default: 10_000 }),
  HERALD_WORKER_STALLED_INTERVAL_MS: Type.Integer({ minimum: 500, maximum: 600_000, default: 5_000 }),
  HERALD_WORKER_FANOUT_CONCURRENCY: Type.Integer({ minimum: 1, maximum: 100, default: 2 }),
  HERALD_WORKER_FANOUT_CHUNK: Type.Integer({ minimum: 1, maximum: 10_000, default: 500 }),
  ...InboxEnv,
  ...DevModeEnv,
  // Where tenants' webhooks are stored (the gateway's prefix) and how the worker delivers them.
  HERALD_KEY_PREFIX: Type.String({ default: 'herald:' }),
  ...WebhookDeliveryEnv,
  ...RedisWaitEnv,
  ...PushSenderEnv,
  HERALD_INSTANCE_ID: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
  ...LogEnv,
});

/** The worker's settings, parsed once at start-up and frozen. */
export interface WorkerConfig {
  /** Where the health and metrics endpoints listen. */
  port: number;
  host: string;
  redisUrl: string;
  /** Redis Cluster start-up nodes (`HERALD_REDIS_CLUSTER_NODES=host:port,…`); when set, `redisUrl` is unused. */
  redisClusterNodes: { host: string; port: number }[] | undefined;
  /**
   * `HERALD_REDIS_WAIT_REPLICAS`: replicas that must have a notification's inbox entry (`WAIT`) before it
   * is pushed live and its job completes; fewer within 1 s fails the attempt (retried). 0: the primary alone.
   */
  redisWaitReplicas: number;
  queue: { name: string; prefix: string };
  /** Channel prefix shared with the realtime servers' Redis adapter. */
  pubsubKey: string;
  /**
   * `classic`: Redis pub/sub (PUBLISH on the user's live channel); `sharded`: Redis 7 sharded pub/sub
   * (SPUBLISH), required on Redis Cluster. Realtime must use the same mode (`@herald/live`).
   */
  pubsubMode: 'classic' | 'sharded';
  concurrency: number;
  /**
   * BullMQ lock of an active job and how often stalled jobs (of a dead worker) are looked for, ms.
   * 10 s / 5 s rather than BullMQ's 30 s / 30 s: a notification whose worker died is taken over within
   * about 15 s; a job takes milliseconds, so renewing its lock every 5 s costs next to nothing.
   */
  lockMs: number;
  stalledIntervalMs: number;
  /**
   * Topic sends and broadcasts: fan-out jobs taken at once per process (their own queue and slots, beside
   * `concurrency`), and recipients per chunk (one page: charged, appended, checkpointed together).
   */
  fanout: { concurrency: number; chunkSize: number };
  inbox: { prefix: string; maxLength: number; maxAgeMs: number };
  /** The gateway's key prefix (`HERALD_KEY_PREFIX`): where tenants' webhooks are stored. */
  keyPrefix: string;
  /** Delivery webhooks (`HERALD_WEBHOOK_*`; private addresses also allowed by `HERALD_DEV_MODE`). */
  webhooks: WebhookWorkerSettings;
  /** Web Push escalations (`HERALD_VAPID_*`, `HERALD_PUSH_*`): off without VAPID keys in production. */
  push: PushSettings;
  /** `HERALD_PUSH_TIMEOUT_MS`: how long one push request may take. */
  pushTimeoutMs: number;
  instanceId: string;
  log: LogSettings;
  /**
   * `HERALD_DEPLOYMENT` and the settings this app must agree on with the others (the JWT secret as
   * its keyed hash): registered in Redis, compared by `/readyz` (see `DeploymentFingerprint`).
   */
  deployment: { name: string; settings: DeploymentSettings };
  /** Start-up warnings to log: unknown `HERALD_*` variables. */
  warnings: readonly string[];
}

/**
 * Reads the worker's configuration from `env` (default `process.env`) and nothing else; every problem
 * is named in one `ConfigError`. The worker's one secret is the VAPID private key (Web Push), checked
 * by `resolvePush`; it holds no token secret and no API key.
 */
export function loadConfig(env: Record<string, string | undefined> = process.env): WorkerConfig {
  const push = resolvePush(env, { sender: true });
  const { values: parsed, warnings } = readEnv('worker', EnvSchema, env, push.problems);
  return Object.freeze({
    port: parsed.PORT,
    host: parsed.HOST,
    redisUrl: parsed.REDIS_URL,
    redisClusterNodes: clusterNodes(parsed),
    redisWaitReplicas: parsed.HERALD_REDIS_WAIT_REPLICAS,
    queue: Object.freeze({ name: parsed.HERALD_QUEUE_NAME, prefix: parsed.HERALD_QUEUE_PREFIX }),
    pubsubKey: parsed.HERALD_PUBSUB_KEY,
    pubsubMode: parsed.HERALD_PUBSUB_MODE,
    concurrency: parsed.HERALD_WORKER_CONCURRENCY,
    lockMs: parsed.HERALD_WORKER_LOCK_MS,
    stalledIntervalMs: parsed.HERALD_WORKER_STALLED_INTERVAL_MS,
    fanout: Object.freeze({
      concurrency: parsed.HERALD_WORKER_FANOUT_CONCURRENCY,
      chunkSize: parsed.HERALD_WORKER_FANOUT_CHUNK,
    }),
    inbox: inboxSettings(parsed),
    keyPrefix: parsed.HERALD_KEY_PREFIX,
    webhooks: webhookSettings(parsed, parsed.HERALD_DEV_MODE),
    push,
    pushTimeoutMs: parsed.HERALD_PUSH_TIMEOUT_MS,
    instanceId: parsed.HERALD_INSTANCE_ID ?? `worker-${hostname()}-${process.pid}`,
    log: logSettings(parsed),
    deployment: Object.freeze({
      name: parsed.HERALD_DEPLOYMENT,
      settings: Object.freeze({
        HERALD_QUEUE_NAME: parsed.HERALD_QUEUE_NAME,
        HERALD_QUEUE_PREFIX: parsed.HERALD_QUEUE_PREFIX,
        HERALD_INBOX_PREFIX: parsed.HERALD_INBOX_PREFIX,
        HERALD_PUBSUB_KEY: parsed.HERALD_PUBSUB_KEY,
        HERALD_PUBSUB_MODE: parsed.HERALD_PUBSUB_MODE,
        HERALD_KEY_PREFIX: parsed.HERALD_KEY_PREFIX,
        HERALD_VAPID_PUBLIC_KEY: push.publicKey ?? '',
      }),
    }),
    warnings: Object.freeze(warnings),
  });
}
