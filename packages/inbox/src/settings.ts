import Type from 'typebox';
import {
  DEFAULT_INBOX_MAX_AGE_MS,
  DEFAULT_INBOX_MAX_LENGTH,
  DEFAULT_INBOX_PREFIX,
  type InboxOptions,
} from './inbox.js';

/**
 * The environment variables of the inbox, as TypeBox properties to spread into an app's env schema, so
 * that the worker, the realtime servers and the gateway read them the same way (they must agree).
 * `HERALD_REDIS_CLUSTER_NODES` (`host:port,…`) switches the app to Redis Cluster.
 *
 * @example
 * ```ts
 * const EnvSchema = Type.Object({ PORT: Type.Integer(), ...InboxEnv });
 * const inbox = new Inbox(redis, inboxSettings(parsed));
 * ```
 */
export const InboxEnv = {
  HERALD_REDIS_CLUSTER_NODES: Type.Optional(Type.String({ pattern: '^[^,:]+:\\d+(,[^,:]+:\\d+)*$' })),
  HERALD_INBOX_PREFIX: Type.String({ minLength: 1, pattern: '^[^{}]+$', default: DEFAULT_INBOX_PREFIX }),
  HERALD_INBOX_MAX_LENGTH: Type.Integer({
    minimum: 1,
    maximum: 1_000_000,
    default: DEFAULT_INBOX_MAX_LENGTH,
  }),
  HERALD_INBOX_MAX_AGE_MS: Type.Integer({ minimum: 1000, default: DEFAULT_INBOX_MAX_AGE_MS }),
};

/** The values {@link InboxEnv} parses to. */
export interface InboxEnvValues {
  HERALD_REDIS_CLUSTER_NODES?: string | undefined;
  HERALD_INBOX_PREFIX: string;
  HERALD_INBOX_MAX_LENGTH: number;
  HERALD_INBOX_MAX_AGE_MS: number;
}

/**
 * The {@link Inbox} options from parsed {@link InboxEnv} values.
 *
 * @example
 * ```ts
 * inboxSettings({ HERALD_INBOX_PREFIX: 'herald:inbox:', HERALD_INBOX_MAX_LENGTH: 1000, HERALD_INBOX_MAX_AGE_MS: 86_400_000 });
 * ```
 */
export function inboxSettings(parsed: InboxEnvValues): Required<Omit<InboxOptions, 'tenantId'>> {
  return Object.freeze({
    prefix: parsed.HERALD_INBOX_PREFIX,
    maxLength: parsed.HERALD_INBOX_MAX_LENGTH,
    maxAgeMs: parsed.HERALD_INBOX_MAX_AGE_MS,
  });
}

/**
 * Redis Cluster start-up nodes from `HERALD_REDIS_CLUSTER_NODES`, or undefined when it is unset.
 *
 * @example
 * ```ts
 * clusterNodes({ HERALD_REDIS_CLUSTER_NODES: '10.0.0.1:7000,10.0.0.2:7000' }); // [{ host: '10.0.0.1', port: 7000 }, …]
 * ```
 */
export function clusterNodes(
  parsed: Pick<InboxEnvValues, 'HERALD_REDIS_CLUSTER_NODES'>,
): { host: string; port: number }[] | undefined {
  return parsed.HERALD_REDIS_CLUSTER_NODES?.split(',').map((node) => {
    const at = node.lastIndexOf(':');
    return { host: node.slice(0, at), port: Number(node.slice(at + 1)) };
  });
}
