import { ConfigError, InstanceIdEnv, readServerEnv, type ServerConfig, ServerEnv } from '@herald/config';
import { InboxEnv, inboxSettings } from '@herald/inbox';
import { PushEnv, type PushSettings, resolvePush, serverEnvExtras } from '@herald/push';
import Type from 'typebox';
import { type AbuseSettings, parseTrustProxy } from './abuse.js';

/** Every variable the realtime server reads (nothing else is looked at). */
export const EnvSchema = Type.Object({
  // ServerEnv's HERALD_QUEUE_*: the webhook queue (`<HERALD_QUEUE_NAME>-webhooks`) this server reports
  // acks and reads to.
  ...ServerEnv(3001),
  // Checked by resolveSecrets: 32+ bytes, the development secret only in development mode.
  HERALD_JWT_SECRET: Type.Optional(Type.String()),
  ...PushEnv,
  HERALD_CORS_ORIGIN: Type.String({ minLength: 1, default: '*' }),
  HERALD_ALLOW_POLLING: Type.Boolean({ default: false }),
  HERALD_MAX_CONNECTIONS_PER_USER: Type.Integer({ minimum: 1, maximum: 10_000, default: 20 }),
  HERALD_PING_INTERVAL_MS: Type.Integer({ minimum: 1000, maximum: 600_000, default: 25_000 }),
  HERALD_PING_TIMEOUT_MS: Type.Integer({ minimum: 1000, maximum: 600_000, default: 20_000 }),
  HERALD_GAP_WAIT_MS: Type.Integer({ minimum: 0, maximum: 60_000, default: 100 }),
  HERALD_REPLAY_PAGE: Type.Integer({ minimum: 1, maximum: 1000, default: 500 }),
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
  ...InstanceIdEnv,
});

/** The realtime server's settings, parsed once at start-up and frozen. */
export interface RealtimeConfig extends ServerConfig {
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
  /** How often connected sockets are checked against revoked API keys; a revoked key's sockets leave within this. */
  revocationCheckMs: number;
  /** Client events per socket and per user, refused handshakes per address, and whose address that is. */
  abuse: AbuseSettings;
  /** Web Push (`HERALD_VAPID_PUBLIC_KEY`, `HERALD_PUSH_ALLOW_PRIVATE`): the key the SDK gets, endpoint checks. */
  push: PushSettings;
}

/**
 * Reads the realtime server's configuration from `env` (default `process.env`) and nothing else; every
 * problem is named in one `ConfigError`.
 */
export function loadConfig(env: Record<string, string | undefined> = process.env): RealtimeConfig {
  const push = resolvePush(env, { sender: false });
  const read = readServerEnv('realtime', EnvSchema, env, { apiKeys: false }, serverEnvExtras(push));
  const { values: parsed, server, secrets } = read;
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
    ...server,
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
    push,
  });
}
