import { DEFAULT_PUBSUB_KEY, DEFAULT_QUEUE_NAME, DEFAULT_QUEUE_PREFIX } from '@herald/protocol';
import Type from 'typebox';
import { DeploymentEnv } from './deployment.js';
import { RedisEnv } from './redis.js';

/**
 * The variables every Herald server process reads first: `PORT` (`defaultPort`), `HOST`, Redis
 * ({@link RedisEnv}) and `HERALD_DEPLOYMENT`, as TypeBox properties to spread into its env schema.
 *
 * @example
 * ```ts
 * const EnvSchema = Type.Object({ ...ServerEnv(3001), ...PubSubEnv });
 * ```
 */
export function ServerEnv(defaultPort: number) {
  return {
    PORT: Type.Integer({ minimum: 0, maximum: 65535, default: defaultPort }),
    HOST: Type.String({ minLength: 1, default: '0.0.0.0' }),
    ...RedisEnv,
    ...DeploymentEnv,
  };
}

/** The live channel's settings (`HERALD_PUBSUB_KEY`, `HERALD_PUBSUB_MODE`): the same in every app. */
export const PubSubEnv = {
  HERALD_PUBSUB_KEY: Type.String({ minLength: 1, default: DEFAULT_PUBSUB_KEY }),
  HERALD_PUBSUB_MODE: Type.Union([Type.Literal('classic'), Type.Literal('sharded')], { default: 'classic' }),
};

/** The notification queue (`HERALD_QUEUE_NAME`, `HERALD_QUEUE_PREFIX`): the gateway's and the workers'. */
export const QueueEnv = {
  HERALD_QUEUE_NAME: Type.String({ minLength: 1, default: DEFAULT_QUEUE_NAME }),
  HERALD_QUEUE_PREFIX: Type.String({ minLength: 1, default: DEFAULT_QUEUE_PREFIX }),
};
