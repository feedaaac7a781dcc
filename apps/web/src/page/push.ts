// The inbox page's Web Push control: "Turn on push" registers this browser's push subscription for the
// user (`client.registerPush`, through the page's service worker `/herald-sw.js`), "Turn off" removes
// it. Herald then sends a notification that no tab acked in time (`escalateAfterMs`) as a push, which
// the service worker shows. A notification the page shows closes its system-notification twin.
import type { HeraldClient } from '@herald/client';

const SERVICE_WORKER = '/herald-sw.js';

/** Why push cannot work in this browser, or undefined when it can. */
function unsupported(): string | undefined {
  if (!('serviceWorker' in navigator) || !('PushManager' in window) || !('Notification' in window))
    return 'This browser has no Web Push.';
  if (!window.isSecureContext) return 'Web Push needs HTTPS (or localhost).';
  return undefined;
}

function say(error: unknown): string {
  const { code, message } = error as { code?: string; message?: string };
  if (code === 'HERALD_ERR_PUSH_NOT_CONFIGURED')
    return 'Push is off on this server (HERALD_VAPID_PUBLIC_KEY).';
  return `Push could not be turned on: ${message ?? String(error)}`;
}

/** Wires `button` and `status` (a `role="status"` element) to push for `client`'s user. */
export function pushControl(client: HeraldClient, button: HTMLButtonElement, status: HTMLElement): void {
  const why = unsupported();
  if (why) {
    status.textContent = why;
    return;
  }
  let on = false;
  const show = (next: boolean, text: string) => {
    on = next;
    button.textContent = on ? 'Turn off push' : 'Turn on push';
    button.setAttribute('aria-pressed', String(on));
    status.textContent = text;
  };
  const devices = (n: number) => `${n} ${n === 1 ? 'browser' : 'browsers'}`;
  const register = async () => {
    const registration = await navigator.serviceWorker.register(SERVICE_WORKER);
    await navigator.serviceWorker.ready;
    const { subscriptions } = await client.registerPush({ registration });
    show(
      true,
      `Push is on: what you miss while the page is closed comes as a notification (${devices(subscriptions)}).`,
    );
  };
  const onClick = async () => {
    button.disabled = true;
    try {
      if (on) {
        const registration = await navigator.serviceWorker.getRegistration(SERVICE_WORKER);
        if (registration) await client.unregisterPush({ registration });
        show(false, 'Push is off for this browser.');
      } else if ((await Notification.requestPermission()) !== 'granted') {
        show(false, 'Notifications are blocked for this site: allow them in the browser to turn push on.');
      } else await register();
    } catch (error) {
      show(on, say(error));
    } finally {
      button.disabled = false;
    }
  };

  void (async () => {
    // A server without Web Push (no HERALD_VAPID_PUBLIC_KEY): no button that could only fail.
    const off = await client.pushPublicKey().then(
      () => false,
      (error: unknown) => (error as { code?: string }).code === 'HERALD_ERR_PUSH_NOT_CONFIGURED',
    );
    if (off) return;
    button.hidden = false;
    show(false, '');
    button.addEventListener('click', () => void onClick());
    // A browser that has push already: register again on every load (the server keeps it fresh).
    if (Notification.permission !== 'granted') return;
    const registration = await navigator.serviceWorker.getRegistration(SERVICE_WORKER);
    if (!(await registration?.pushManager.getSubscription())) return;
    await register().catch((error: unknown) => show(false, say(error)));
  })();

  // Shown here, so not twice: the system notification of a notification the page now has is closed.
  const closeShown = async () => {
    const registration = await navigator.serviceWorker.getRegistration(SERVICE_WORKER);
    if (!registration) return;
    const ids = new Set(client.getState().items.map((item) => item.id));
    for (const notification of await registration.getNotifications())
      if (ids.has(notification.tag)) notification.close();
  };
  let items = client.getState().items;
  void closeShown();
  client.subscribe((state) => {
    if (state.items === items) return;
    items = state.items;
    void closeShown();
  });
}
