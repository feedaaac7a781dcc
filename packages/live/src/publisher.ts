import type { NotificationEvent, UnreadEvent } from '@herald/protocol';
import type { Cluster, Redis } from 'ioredis';
import { encodeLiveMessage, LIVE_MESSAGE_VERSION, type LiveChannelSettings, liveChannel } from './message.js';

/**
 * Pushes events to every connected client of one user, whichever realtime instance holds them. The
 * worker publishes notifications; the gateway and realtime publish unread counts after a read mark.
 */
export interface LivePublisher {
  /** To the connected clients of `event.userId` of `tenantId`. */
  notification(tenantId: string, event: NotificationEvent): void;
  unread(tenantId: string, userId: string, unread: UnreadEvent): void;
}

/** Called with a publish that Redis refused or could not take (the default ignores it). */
export type LivePublishErrorHandler = (error: unknown) => void;
const ignore: LivePublishErrorHandler = () => {};

/**
 * Publishes {@link LiveMessage}s on each user's {@link liveChannel}: PUBLISH in `classic` mode, SPUBLISH in
 * `sharded` mode (Redis 7; on Redis Cluster the channel's hash tag picks its shard). Fire-and-forget: a
 * live message only saves the realtime server an inbox read, so a failed publish goes to `onError`, never
 * to an unhandled rejection.
 *
 * @example
 * ```ts
 * const live = livePublisher(redis, { key: 'herald', mode: 'classic' }, (err) => log.warn({ err }));
 * live.unread('acme', 'alice', { count: 0, version: 7 });
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
      : (channel: string, text: string) => redis.publish(channel, text);
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
