// `@herald/client/push-message`: what a service worker needs of the SDK, without the socket (a service
// worker that imports the whole client would carry Socket.IO for nothing).
import type { PushMessage } from '@herald/protocol';

/**
 * The Herald notification a Web Push message carries (`event.data.json()` in a service worker's `push`
 * handler), or undefined when the message is not Herald's. Show it with `tag: message.id`, so that the
 * same notification replaces rather than repeats, and skip it when a tab of the page is visible (that
 * tab shows it from the socket, where the inbox holds each id once).
 *
 * @example
 * ```ts
 * self.addEventListener('push', (event) => {
 *   const message = heraldPushMessage(event.data?.json());
 *   if (message) event.waitUntil(self.registration.showNotification(String(message.payload?.title ?? 'New notification'), { tag: message.id, data: message }));
 * });
 * ```
 */
export function heraldPushMessage(data: unknown): PushMessage | undefined {
  const message = data as Partial<PushMessage> | null | undefined;
  if (message?.kind !== 'herald.notification' || typeof message.id !== 'string') return undefined;
  return typeof message.offset === 'string' ? (message as PushMessage) : undefined;
}
