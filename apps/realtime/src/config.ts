import { hostname } from 'node:os';
import {
  ConfigError,
  clusterNodes,
  type DeploymentSettings,
  DevModeEnv,
  LogEnv,
  type LogSettings,
  logSettings,
  PubSubEnv,
  QueueEnv,
  readEnv,
  resolveSecrets,
  ServerEnv,
  secretFingerprint,
} from '@herald/config';
import { InboxEnv, inboxSettings } from '@herald/inbox';
import { PushEnv, type PushSettings, resolvePush } from '@herald/push';
import Type from 'typebox';
import { type AbuseSettings, parseTrustProxy } from './abuse.js';

/** Every variable the realtime server reads (nothing else is looked at). */
export const EnvSchema = Type.Object({
  ...ServerEnv(3001),
  ...DevModeEnv,
  // Checked by resolveSecrets: 32+ bytes, the development secret only in development mode.
  HERALD_JWT_SECRET: Type.Optional(Type.String()),
  ...PubSubEnv,
  // The webhook queue (`<HERALD_QUEUE_NAME>-webhooks`) this server reports acks and reads to.
  ...QueueEnv,
  ...PushEnv,
  HERALD_CORS_ORIGIN: Type.String({ minLength: 1, default: '*' }),
  HERALD_ALLOW_POLLING: Type.Boolean({ default: false }),
  HERALD_MAX_CONNECTIONS_PER_USER: Type.Integer({ minimum: 1, maximum: 10_000, default: 20 }),
  HERALD_PING_INTERVAL_MS: Type.Integer({ minimum: 1000, maximum: 600_000, default: 25_000 }),
  HERALD_PING_TIMEOUT_MS: Type.Integer({ minimum: 1000, maximum: 600_000, default: 20_000 }),
  HERALD_GAP_WAIT_MS: Type.Integer({ minimum: 0, maximum: 60_000, default: 100 }),
  HERALD_REPLAY_PAGE: Type.Integer({ minimum: 1, maximum: 1000, default: 500 }),
  HERALD_KEY_PREFIX: Type.String({ default: 'herald:' }),
  HERALD_REVOCATION_CHECK_MS: Type.Integer({ minimum: 100, maximum: 60_000, default: 2000 }),
  // Abuse limits (abuse.ts): events per socket and per user, refused handshakes per client address.
  // A socket's burst covers a client that acks each of a full replay (HERALD_INBOX_MAX_LENGTH, 1000).
  HERALD_SOCKET_EVENTS_PER_SECOND: Type.Number({ exclusiveMinimum: 0, maximum: 1_000_000, default: 100 }),
  HERALD_SOCKET_EVENTS_BURST: Type.Integer({ minimum: 1, maximum: 1_000_000, default: 1000 }),
  HERALD_USER_EVENTS_PER_SECOND: Type.Number({ exclusiveMinimum: 0, maximum: 1_000_000, default: 200 }),
  HERALD_USER_EVENTS_BURST: Type.Integer({ minimum: 1, maximum: 1_000_000, default: 2000 }),
  HERALD_REFUSED_HANDSHAKES_PER_SECOND: Type.Number({ exclusiveMinimum: 0, maximum: 1_000_000, default: 1 }),
  HERALD_REFUSED_HANDSHAKES_BURST: Type.Integer({ minimum: 1, maximum: 1_000_000, default: 30 }),
  HERALD_TRUST_PROXY: Type.String({ minLength: 1, default: 'false' }),
  HERALD_RATE_LIMIT_PREFIX: Type.String({ pattern: '^[^{}]*$', default: 'ratelimit:' }),
  ...InboxEnv,
  HERALD_INSTANCE_ID: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
  ...LogEnv,
});

/** The realtime server's settings, parsed once at start-up and frozen. */
export interface RealtimeConfig {
  port: number;
  host: string;
  redisUrl: string;
  /** Redis Cluster start-up nodes (`HERALD_REDIS_CLUSTER_NODES=host:port,…`); when set, `redisUrl` is unused. */
  redisClusterNodes: { host: string; port: number }[] | undefined;
  jwtSecret: string;
  usingDevJwtSecret: boolean;
  /** `HERALD_DEV_MODE=true`: the development secret is accepted (see the README's security model). */
  devMode: boolean;
  /** Live channel prefix shared with the workers and the gateway (`@herald/live`). */
  pubsubKey: string;
  /** Allowed browser origins: `*`, or a comma-separated list. */
  corsOrigin: string | string[];
  /** `classic`: SUBSCRIBE to each user's live channel; `sharded`: SSUBSCRIBE (Redis 7 sharded pub/sub, for Cluster). */
  pubsubMode: 'classic' | 'sharded';
  /**
   * WebSocket only by default: any instance can take any connection, no sticky sessions. With polling
   * allowed, a load balancer must pin each client to one instance (sticky sessions), because a polling
   * session's requests must all reach the instance that holds it.
   */
  allowPolling: boolean;
  /** Sockets one user may hold on one instance; more are refused with HERALD_ERR_TOO_MANY_CONNECTIONS. */
  maxConnectionsPerUser: number;
  /** Engine.IO heartbeat: a ping every `pingIntervalMs`; no pong within `pingTimeoutMs` closes the socket. */
  pingIntervalMs: number;
  pingTimeoutMs: number;
  /** How long a live notification that arrives ahead of a missing one waits before the inbox is read. */
  gapWaitMs: number;
  /** Notifications per inbox read during a replay. */
  replayPage: number;
  inbox: { prefix: string; maxLength: number; maxAgeMs: number };
  /** The notification queue's name and prefix: the webhook queue sits beside it. */
  queue: { name: string; prefix: string };
  /** The gateway's key prefix (`HERALD_KEY_PREFIX`): where revoked API keys are listed. Must match the gateway's. */
  keyPrefix: string;
  /** How often connected sockets are checked against revoked API keys; a revoked key's sockets leave within this. */
  revocationCheckMs: number;
  /** Client events per socket and per user, refused handshakes per address, and whose address that is. */
  abuse: AbuseSettings;
  /** Recorded as `deliveredBy` of the acks this instance receives. */
  instanceId: string;
  log: LogSettings;
  /**
   * `HERALD_DEPLOYMENT` and the settings this app must agree on with the others (the JWT secret as
   * its keyed hash): registered in Redis, compared by `/readyz` (see `DeploymentFingerprint`).
   */
  deployment: { name: string; settings: DeploymentSettings };
  /** Web Push (`HERALD_VAPID_PUBLIC_KEY`, `HERALD_PUSH_ALLOW_PRIVATE`): the key the SDK gets, endpoint checks. */
  push: PushSettings;
  /** Start-up warnings to log: development mode, unknown `HERALD_*` variables. */
  warnings: readonly string[];
}

/**
 * Reads the realtime server's configuration from `env` (default `process.env`) and nothing else; every
 * problem is named in one `ConfigError`.
 */
export function loadConfig(env: Record<string, string | undefined> = process.env): RealtimeConfig {
  const secrets = resolveSecrets(env, { apiKeys: false });
  const push = resolvePush(env, { sender: false });
  const { values: parsed, warnings } = readEnv('realtime', EnvSchema, env, [
    ...secrets.problems,
    ...push.problems,
  ]);
  let trustProxy: AbuseSettings['trustProxy'];
  try {
    trustProxy = parseTrustProxy(parsed.HERALD_TRUST_PROXY);
  } catch (error) {
    throw new ConfigError(
      `Invalid realtime configuration: HERALD_TRUST_PROXY must be true, false, a number of hops or a comma-separated list of addresses/CIDRs (${(error as Error).message})`,
      { cause: error },
    );
  }
  const origins = parsed.HERALD_CORS_ORIGIN.split(',').map((origin) => origin.trim());
  return Object.freeze({
    port: parsed.PORT,
    host: parsed.HOST,
    redisUrl: parsed.REDIS_URL,
    redisClusterNodes: clusterNodes(parsed),
    jwtSecret: secrets.jwtSecret,
    usingDevJwtSecret: secrets.usingDevJwtSecret,
    devMode: secrets.devMode,
    pubsubKey: parsed.HERALD_PUBSUB_KEY,
    corsOrigin: origins.length === 1 && origins[0] === '*' ? '*' : origins,
    pubsubMode: parsed.HERALD_PUBSUB_MODE,
    allowPolling: parsed.HERALD_ALLOW_POLLING,
    maxConnectionsPerUser: parsed.HERALD_MAX_CONNECTIONS_PER_USER,
    pingIntervalMs: parsed.HERALD_PING_INTERVAL_MS,
    pingTimeoutMs: parsed.HERALD_PING_TIMEOUT_MS,
    gapWaitMs: parsed.HERALD_GAP_WAIT_MS,
    replayPage: parsed.HERALD_REPLAY_PAGE,
    inbox: inboxSettings(parsed),
    keyPrefix: parsed.HERALD_KEY_PREFIX,
    queue: Object.freeze({ name: parsed.HERALD_QUEUE_NAME, prefix: parsed.HERALD_QUEUE_PREFIX }),
    revocationCheckMs: parsed.HERALD_REVOCATION_CHECK_MS,
    abuse: Object.freeze({
      socketEvents: {
        burst: parsed.HERALD_SOCKET_EVENTS_BURST,
        perSecond: parsed.HERALD_SOCKET_EVENTS_PER_SECOND,
      },
      userEvents: { burst: parsed.HERALD_USER_EVENTS_BURST, perSecond: parsed.HERALD_USER_EVENTS_PER_SECOND },
      refusedHandshakes: {
        burst: parsed.HERALD_REFUSED_HANDSHAKES_BURST,
        perSecond: parsed.HERALD_REFUSED_HANDSHAKES_PER_SECOND,
      },
      trustProxy,
      keyPrefix: parsed.HERALD_RATE_LIMIT_PREFIX,
    }),
    instanceId: parsed.HERALD_INSTANCE_ID ?? `realtime-${hostname()}-${process.pid}`,
    log: logSettings(parsed),
    deployment: Object.freeze({
      name: parsed.HERALD_DEPLOYMENT,
      settings: Object.freeze({
        HERALD_INBOX_PREFIX: parsed.HERALD_INBOX_PREFIX,
        HERALD_PUBSUB_KEY: parsed.HERALD_PUBSUB_KEY,
        HERALD_PUBSUB_MODE: parsed.HERALD_PUBSUB_MODE,
        HERALD_KEY_PREFIX: parsed.HERALD_KEY_PREFIX,
        HERALD_QUEUE_NAME: parsed.HERALD_QUEUE_NAME,
        HERALD_QUEUE_PREFIX: parsed.HERALD_QUEUE_PREFIX,
        HERALD_JWT_SECRET: secretFingerprint(secrets.jwtSecret),
        HERALD_VAPID_PUBLIC_KEY: push.publicKey ?? '',
      }),
    }),
    push,
    warnings: Object.freeze([...secrets.warnings, ...warnings]),
  });
}
