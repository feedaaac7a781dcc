// The inbox page's service worker (`/herald-sw.js`, scope `/`): shows the Web Push messages Herald
// sends when no tab acked a notification in time (`escalateAfterMs`), once per notification. It is
// also the example for a site of its own: the Herald-specific part is `heraldPushMessage`.
import { heraldPushMessage } from '@herald/client/push-message';
import type { PushMessage } from '@herald/protocol';

declare const self: ServiceWorkerGlobalScope;

self.addEventListener('install', () => {
  void self.skipWaiting();
});
self.addEventListener('activate', (event) => event.waitUntil(self.clients.claim()));

self.addEventListener('push', (event) => {
  let data: unknown;
  try {
    data = event.data?.json();
  } catch {
    return; // not JSON: not Herald's
  }
  const message = heraldPushMessage(data);
  if (message) event.waitUntil(show(message));
});

/**
 * Shows `message` as a system notification tagged with its id, so that the same notification pushed
 * again replaces rather than repeats, unless a tab of the page is visible: that tab shows it from its
 * socket (the push and the socket raced), and a second copy here would be twice.
 */
async function show(message: PushMessage): Promise<void> {
  const windows = await self.clients.matchAll({ type: 'window', includeUncontrolled: true });
  if (windows.some((client) => client.visibilityState === 'visible')) return;
  const payload = message.payload ?? {};
  const title =
    typeof payload.title === 'string' && payload.title !== '' ? payload.title : 'New notification';
  const createdAt = Date.parse(message.createdAt);
  await self.registration.showNotification(title, {
    ...(typeof payload.body === 'string' ? { body: payload.body } : {}),
    tag: message.id,
    data: { id: message.id, offset: message.offset, userId: message.userId },
    ...(Number.isFinite(createdAt) ? { timestamp: createdAt } : {}),
  } as NotificationOptions);
}

/** A click opens the inbox: the tab already open, else a new one for the notification's user. */
self.addEventListener('notificationclick', (event) => {
  event.notification.close();
  const userId = (event.notification.data as { userId?: unknown } | null)?.userId;
  event.waitUntil(
    (async () => {
      const windows = await self.clients.matchAll({ type: 'window', includeUncontrolled: true });
      const open = windows.find((client) => new URL(client.url).pathname === '/');
      if (open) {
        await open.focus();
        return;
      }
      const url = new URL(self.registration.scope);
      if (typeof userId === 'string') url.searchParams.set('user', userId);
      await self.clients.openWindow(url.href);
    })(),
  );
});
