import { type NotificationEvent, type UnreadChangeEvent, userKey } from '@herald/protocol';

/** Version of {@link LiveMessage}; a subscriber ignores (and reports) any other. */
export const LIVE_MESSAGE_VERSION = 1;

/** How the live hop uses Redis pub/sub: `classic` PUBLISH/SUBSCRIBE, or Redis 7 `sharded` SPUBLISH/SSUBSCRIBE. */
export type PubsubMode = 'classic' | 'sharded';

/** Where live messages go: the channel prefix (`HERALD_PUBSUB_KEY`) and the pub/sub mode (`HERALD_PUBSUB_MODE`). */
export interface LiveChannelSettings {
  key: string;
  mode: PubsubMode;
}

/** A new notification for every connected client of one user (the worker publishes it after the inbox append). */
export interface LiveNotificationMessage {
  v: typeof LIVE_MESSAGE_VERSION;
  kind: 'notification';
  tenantId: string;
  userId: string;
  event: NotificationEvent;
}

/** The user's new unread count and the ids read (the gateway or realtime publishes it after a read mark). */
export interface LiveUnreadMessage {
  v: typeof LIVE_MESSAGE_VERSION;
  kind: 'unread';
  tenantId: string;
  userId: string;
  unread: UnreadChangeEvent;
}

/** What travels on a user's live channel, as JSON. */
export type LiveMessage = LiveNotificationMessage | LiveUnreadMessage;

/**
 * The pub/sub channel of one user of one tenant: `<key>:live:{<tenantId>/<userId>}`. The braces are a
 * Redis Cluster hash tag, so in `sharded` mode each user's channel lives on one shard and the users spread
 * over all of them; `classic` mode uses the same name.
 *
 * @example
 * ```ts
 * liveChannel('herald', 'acme', 'alice'); // 'herald:live:{acme/alice}'
 * ```
 */
export function liveChannel(key: string, tenantId: string, userId: string): string {
  return `${key}:live:{${userKey(tenantId, userId)}}`;
}

/** Thrown by {@link decodeLiveMessage} for anything that is not a {@link LiveMessage} of this version. */
export class LiveMessageError extends Error {
  readonly code = 'HERALD_ERR_LIVE_MESSAGE';
}

/** JSON text of a {@link LiveMessage}. */
export function encodeLiveMessage(message: LiveMessage): string {
  return JSON.stringify(message);
}

/**
 * Parses and checks a message read from a live channel.
 *
 * @throws {LiveMessageError} not JSON, another version, or a field missing.
 * @example
 * ```ts
 * const message = decodeLiveMessage(text);
 * if (message.kind === 'notification') delivery.live(message.event);
 * ```
 */
export function decodeLiveMessage(text: string): LiveMessage {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new LiveMessageError('live message is not JSON', { cause: error });
  }
  const message = value as Record<string, unknown> | null;
  if (typeof message !== 'object' || message === null || message.v !== LIVE_MESSAGE_VERSION) {
    throw new LiveMessageError(
      `live message of an unknown version (this process reads v${LIVE_MESSAGE_VERSION})`,
    );
  }
  if (typeof message.tenantId !== 'string' || typeof message.userId !== 'string') {
    throw new LiveMessageError('live message without tenantId/userId');
  }
  const isObject = (field: unknown) => typeof field === 'object' && field !== null;
  if (message.kind === 'notification' && isObject(message.event))
    return message as unknown as LiveNotificationMessage;
  if (message.kind === 'unread' && isObject(message.unread)) return message as unknown as LiveUnreadMessage;
  throw new LiveMessageError(`live message of an unknown kind: ${String(message.kind)}`);
}
