import { hostname } from 'node:os';
import { DEFAULT_PUBSUB_KEY, DEFAULT_QUEUE_NAME, DEFAULT_QUEUE_PREFIX } from '@herald/protocol';
import Type, { type Static, type TObject } from 'typebox';
import {
  DeploymentEnv,
  type DeploymentEnvValues,
  type DeploymentSettings,
  deploymentSettings,
  type HeraldApp,
} from './deployment.js';
import { DevModeEnv, readEnv } from './env.js';
import { LogEnv, type LogSettings, logSettings } from './logging.js';
import { MAX_QUEUE_PARTITIONS, type QueueSettings } from './partitions.js';
import { clusterNodes, RedisEnv } from './redis.js';
import { resolveSecrets, type SecretSettings } from './secrets.js';

/** The live channel's settings (`HERALD_PUBSUB_KEY`, `HERALD_PUBSUB_MODE`): the same in every app. */
export const PubSubEnv = {
  HERALD_PUBSUB_KEY: Type.String({ minLength: 1, default: DEFAULT_PUBSUB_KEY }),
  HERALD_PUBSUB_MODE: Type.Union([Type.Literal('classic'), Type.Literal('sharded')], { default: 'classic' }),
};

/**
 * The notification queue (`HERALD_QUEUE_NAME`, `HERALD_QUEUE_PREFIX`) and how many partitions it is spread
 * over (`HERALD_QUEUE_PARTITIONS`, see {@link queuePartitions}): the gateway's and the workers'.
 */
export const QueueEnv = {
  HERALD_QUEUE_NAME: Type.String({ minLength: 1, default: DEFAULT_QUEUE_NAME }),
  HERALD_QUEUE_PREFIX: Type.String({ minLength: 1, default: DEFAULT_QUEUE_PREFIX }),
  HERALD_QUEUE_PARTITIONS: Type.Integer({ minimum: 1, maximum: MAX_QUEUE_PARTITIONS, default: 1 }),
};

/**
 * `HERALD_KEY_PREFIX`: the prefix of the gateway's own keys (API keys, revoked keys, idempotency records,
 * statuses, tenants' webhooks), which the worker and the realtime servers read too.
 */
export const KeyPrefixEnv = {
  HERALD_KEY_PREFIX: Type.String({ default: 'herald:' }),
};

/**
 * The variables every Herald server (the gateway, the worker, the realtime servers) reads: `PORT`
 * (`defaultPort`), `HOST`, Redis ({@link RedisEnv}), `HERALD_DEPLOYMENT`, `HERALD_DEV_MODE`, the live
 * channel ({@link PubSubEnv}), the notification queue ({@link QueueEnv}), the gateway's key prefix
 * ({@link KeyPrefixEnv}) and logging ({@link LogEnv}), as TypeBox properties to spread into its env
 * schema. {@link readServerEnv} reads them.
 *
 * @example
 * ```ts
 * const EnvSchema = Type.Object({ ...ServerEnv(3001), ...InboxEnv });
 * ```
 */
export function ServerEnv(defaultPort: number) {
  return {
    PORT: Type.Integer({ minimum: 0, maximum: 65535, default: defaultPort }),
    HOST: Type.String({ minLength: 1, default: '0.0.0.0' }),
    ...RedisEnv,
    ...DeploymentEnv,
    ...DevModeEnv,
    ...PubSubEnv,
    ...QueueEnv,
    ...KeyPrefixEnv,
    ...LogEnv,
  };
}

/** `HERALD_INSTANCE_ID`: the instance's name, a worker's or a realtime server's (see {@link ServerConfig}). */
export const InstanceIdEnv = {
  HERALD_INSTANCE_ID: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
};

/** What every Herald server's configuration holds, from its {@link ServerEnv} (see {@link readServerEnv}). */
export interface ServerConfig {
  /** Where the app listens (the worker: its health and metrics endpoints). */
  port: number;
  host: string;
  redisUrl: string;
  /** Redis Cluster start-up nodes (`HERALD_REDIS_CLUSTER_NODES=host:port,…`); when set, `redisUrl` is unused. */
  redisClusterNodes: { host: string; port: number }[] | undefined;
  /**
   * The notification queue's name, prefix and partitions (see `queuePartitions`); the fan-out, webhook
   * and escalation queues sit beside its partition 0.
   */
  queue: QueueSettings;
  /**
   * `HERALD_KEY_PREFIX`: the gateway's own keys (API keys, idempotency records, statuses), where the
   * worker finds tenants' webhooks and the realtime servers revoked API keys. Must be the same in every app.
   */
  keyPrefix: string;
  /**
   * This instance's name in its deployment (and a realtime server's acks' `deliveredBy`):
   * `HERALD_INSTANCE_ID` where the app reads it ({@link InstanceIdEnv}), else `<app>-<hostname>-<pid>`.
   */
  instanceId: string;
  log: LogSettings;
  /**
   * `HERALD_DEPLOYMENT` and the settings this app must agree on with the others (the JWT secret as
   * its keyed hash): registered in Redis, compared by `/readyz` (see `DeploymentFingerprint`).
   */
  deployment: { name: string; settings: DeploymentSettings };
  /** Start-up warnings to log: development mode (apps that hold secrets), unknown `HERALD_*` variables. */
  warnings: readonly string[];
}

/** The parsed values a {@link ServerConfig} is made of: {@link ServerEnv}'s, and the inbox prefix (`InboxEnv`). */
interface ServerEnvValues extends DeploymentEnvValues {
  PORT: number;
  HOST: string;
  REDIS_URL: string;
  HERALD_REDIS_CLUSTER_NODES?: string | undefined;
  HERALD_DEPLOYMENT: string;
  HERALD_INSTANCE_ID?: string | undefined;
  HERALD_LOG_LEVEL: string;
  HERALD_LOG_FORMAT: 'json' | 'pretty';
}

/** Which secrets a server holds ({@link resolveSecrets}'s options); `check: false` reads them without refusing. */
export interface ServerSecretOptions {
  apiKeys: boolean;
  adminKey?: boolean;
  check?: boolean;
}

/** What an app adds to {@link readServerEnv}: problems it found itself, settings the others must share. */
export interface ServerEnvExtras {
  /** Problems of the app's own checks (e.g. its Web Push keys), named in the same `ConfigError`. */
  problems?: readonly string[];
  /** More settings that must agree across the apps (the deployment fingerprint). */
  deployment?: Readonly<Record<string, string>>;
}

/**
 * How a Herald server reads its environment, once at start-up: `schema`'s variables from `env` and
 * nothing else ({@link readEnv}), with `secrets` also checked by {@link resolveSecrets} (every problem in
 * one `ConfigError`, with `extras.problems`), and the {@link ServerConfig} they make: its deployment
 * settings record the fingerprint of `HERALD_JWT_SECRET` in the apps that hold secrets (and
 * `extras.deployment`), its warnings are the secrets' and `readEnv`'s. `schema` spreads {@link ServerEnv}
 * and `InboxEnv`.
 *
 * @example
 * ```ts
 * const { values, server } = readServerEnv('worker', EnvSchema, process.env);
 * const { values, server, secrets } = readServerEnv('realtime', EnvSchema, process.env, { apiKeys: false });
 * ```
 */
export function readServerEnv<S extends TObject>(
  app: HeraldApp,
  schema: ServerSchema<S>,
  env: Readonly<Record<string, string | undefined>>,
  secrets?: undefined,
  extras?: ServerEnvExtras,
): { values: Static<S>; server: ServerConfig };
export function readServerEnv<S extends TObject>(
  app: HeraldApp,
  schema: ServerSchema<S>,
  env: Readonly<Record<string, string | undefined>>,
  secrets: ServerSecretOptions,
  extras?: ServerEnvExtras,
): { values: Static<S>; server: ServerConfig; secrets: SecretSettings };
export function readServerEnv<S extends TObject>(
  app: HeraldApp,
  schema: ServerSchema<S>,
  env: Readonly<Record<string, string | undefined>>,
  options?: ServerSecretOptions,
  extras: ServerEnvExtras = {},
): { values: Static<S>; server: ServerConfig; secrets?: SecretSettings } {
  const secrets = options && resolveSecrets(env, options);
  const checked = options?.check !== false;
  const problems = checked ? [...(secrets?.problems ?? []), ...(extras.problems ?? [])] : [];
  const { values, warnings } = readEnv(app, schema, env, problems);
  const parsed = values as ServerEnvValues;
  const server: ServerConfig = {
    port: parsed.PORT,
    host: parsed.HOST,
    redisUrl: parsed.REDIS_URL,
    redisClusterNodes: clusterNodes(parsed),
    queue: Object.freeze({
      name: parsed.HERALD_QUEUE_NAME,
      prefix: parsed.HERALD_QUEUE_PREFIX,
      partitions: parsed.HERALD_QUEUE_PARTITIONS,
    }),
    keyPrefix: parsed.HERALD_KEY_PREFIX,
    instanceId: parsed.HERALD_INSTANCE_ID ?? `${app}-${hostname()}-${process.pid}`,
    log: logSettings(parsed),
    deployment: Object.freeze({
      name: parsed.HERALD_DEPLOYMENT,
      settings: Object.freeze({
        ...deploymentSettings(parsed, secrets?.jwtSecret),
        ...extras.deployment,
      }),
    }),
    warnings: Object.freeze([...(secrets?.warnings ?? []), ...warnings]),
  };
  return secrets ? { values, server, secrets } : { values, server };
}

/** `S`, when its values hold a {@link ServerConfig}'s (it spreads {@link ServerEnv} and `InboxEnv`). */
type ServerSchema<S extends TObject> = S & (Static<S> extends ServerEnvValues ? unknown : never);
