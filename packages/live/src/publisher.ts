import type { NotificationEvent, UnreadChangeEvent } from '@herald/protocol';
import type { Cluster, Redis } from 'ioredis';
import { encodeLiveMessage, LIVE_MESSAGE_VERSION, type LiveChannelSettings, liveChannel } from './message.js';

/**
 * Pushes events to every connected client of one user, whichever realtime instance holds them. The
 * worker publishes notifications; the gateway and realtime publish unread counts after a read mark.
 */
export interface LivePublisher {
  /** To the connected clients of `event.userId` of `tenantId`. */
  notification(tenantId: string, event: NotificationEvent): void;
  /** The new count of `userId` of `tenantId` after a read mark, with the ids it marked read (`read`). */
  unread(tenantId: string, userId: string, unread: UnreadChangeEvent): void;
}

/** Called with a publish that Redis refused or could not take (the default ignores it). */
export type LivePublishErrorHandler = (error: unknown) => void;
const ignore: LivePublishErrorHandler = () => {};

/**
 * PUBLISH in send order. On Redis Cluster ioredis sends a command without a key (PUBLISH) to a random
 * node each time, and two messages of one channel that entered by two nodes can reach a subscriber out of
 * order (each node forwards over its own cluster bus link): every classic publish goes through one master
 * (the first by address), whose one connection keeps them in order. The Cluster forwards a classic message
 * to every node whichever it entered by (sharded pub/sub, `HERALD_PUBSUB_MODE=sharded`, does not: the
 * mode for a Cluster).
 */
function classicPublish(redis: Redis | Cluster): (channel: string, text: string) => Promise<number> {
  if (!redis.isCluster) return (channel, text) => redis.publish(channel, text);
  const cluster = redis as Cluster;
  const address = (node: Redis) => `${node.options.host}:${node.options.port}`;
  return (channel, text) => {
    const masters = cluster.nodes('master');
    // Not connected yet: through the Cluster client, which queues or refuses it as it does any command.
    if (masters.length === 0) return cluster.publish(channel, text);
    const first = masters.reduce((a, b) => (address(b) < address(a) ? b : a));
    return first.publish(channel, text);
  };
}

/**
 * Publishes {@link LiveMessage}s on each user's {@link liveChannel}: PUBLISH in `classic` mode, SPUBLISH in
 * `sharded` mode (Redis 7; on Redis Cluster the channel's hash tag picks its shard). Fire-and-forget: a
 * live message only saves the realtime server an inbox read, so a failed publish goes to `onError`, never
 * to an unhandled rejection.
 *
 * @example
 * ```ts
 * const live = livePublisher(redis, { key: 'herald', mode: 'classic' }, (err) => log.warn({ err }));
 * live.unread('acme', 'alice', { count: 0, version: 7, read: ['n-1'] });
 * ```
 */
export function livePublisher(
  redis: Redis | Cluster,
  settings: LiveChannelSettings,
  onError: LivePublishErrorHandler = ignore,
): LivePublisher {
  const publish =
    settings.mode === 'sharded'
      ? (channel: string, text: string) => redis.spublish(channel, text)
      : classicPublish(redis);
  const send = (tenantId: string, userId: string, text: string) => {
    publish(liveChannel(settings.key, tenantId, userId), text).catch(onError);
  };
  return {
    notification(tenantId, event) {
      const userId = event.userId;
      send(
        tenantId,
        userId,
        encodeLiveMessage({ v: LIVE_MESSAGE_VERSION, kind: 'notification', tenantId, userId, event }),
      );
    },
    unread(tenantId, userId, unread) {
      send(
        tenantId,
        userId,
        encodeLiveMessage({ v: LIVE_MESSAGE_VERSION, kind: 'unread', tenantId, userId, unread }),
      );
    },
  };
}
