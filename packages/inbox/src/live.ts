import {
  NOTIFICATION_EVENT,
  type NotificationEvent,
  type ServerToClientEvents,
  SocketEvent,
  type UnreadEvent,
  userRoom,
} from '@herald/protocol';
import { Emitter } from '@socket.io/redis-emitter';
import type { Cluster, Redis } from 'ioredis';

/**
 * Pushes events to every connected client of one user, whichever realtime instance holds them. The
 * worker publishes notifications; the gateway publishes unread counts after a REST read.
 */
export interface LivePublisher {
  /** To the connected clients of `event.userId` of `tenantId` (room {@link userRoom}). */
  notification(tenantId: string, event: NotificationEvent): void;
  unread(tenantId: string, userId: string, unread: UnreadEvent): void;
}

/** Called with a publish that Redis refused or could not take (the default ignores it). */
export type LivePublishErrorHandler = (error: unknown) => void;
const ignore: LivePublishErrorHandler = () => {};

/**
 * Classic Redis pub/sub, through `@socket.io/redis-emitter` (the realtime servers use `createAdapter`).
 * Publishing is fire-and-forget: a failed publish goes to `onError`, never to an unhandled rejection.
 *
 * @example
 * ```ts
 * const live = classicPublisher(redis, 'socket.io');
 * live.unread('acme', 'alice', { count: 0, version: 7 });
 * ```
 */
export function classicPublisher(
  redis: Redis | Cluster,
  pubsubKey: string,
  onError: LivePublishErrorHandler = ignore,
): LivePublisher {
  // The emitter drops what `publish` returns: a rejection (Redis down) would end the process.
  const client = {
    publish: (channel: string, message: string | Buffer) => redis.publish(channel, message).catch(onError),
  };
  const emitter = new Emitter<ServerToClientEvents>(client, { key: pubsubKey });
  return {
    notification(tenantId, event) {
      emitter.to(userRoom(tenantId, event.userId)).emit(NOTIFICATION_EVENT, event);
    },
    unread(tenantId, userId, unread) {
      emitter.to(userRoom(tenantId, userId)).emit(SocketEvent.UNREAD, unread);
    },
  };
}

// socket.io-adapter's ClusterAdapter message: type 3 = BROADCAST; packet type 2 = EVENT.
const BROADCAST = 3;
const EVENT_PACKET = 2;

/**
 * Redis 7 sharded pub/sub, for realtime servers on `createShardedAdapter` (subscription mode `dynamic`):
 * `@socket.io/redis-emitter` 5.1 cannot publish there, so this writes the adapter's own message format,
 * as JSON, with SPUBLISH to the room's channel `<key>#/#<room>#` (one slot per room on Redis Cluster).
 * A failed publish goes to `onError`.
 *
 * @example
 * ```ts
 * const live = shardedPublisher(cluster, 'socket.io');
 * live.notification('acme', event);
 * ```
 */
export function shardedPublisher(
  redis: Redis | Cluster,
  pubsubKey: string,
  onError: LivePublishErrorHandler = ignore,
): LivePublisher {
  const publish = (room: string, event: string, data: unknown) => {
    const message = {
      uid: 'herald-worker',
      nsp: '/',
      type: BROADCAST,
      data: {
        packet: { type: EVENT_PACKET, data: [event, data], nsp: '/' },
        opts: { rooms: [room], except: [], flags: {} },
      },
    };
    redis.spublish(`${pubsubKey}#/#${room}#`, JSON.stringify(message)).catch(onError);
  };
  return {
    notification(tenantId, event) {
      publish(userRoom(tenantId, event.userId), NOTIFICATION_EVENT, event);
    },
    unread(tenantId, userId, unread) {
      publish(userRoom(tenantId, userId), SocketEvent.UNREAD, unread);
    },
  };
}
