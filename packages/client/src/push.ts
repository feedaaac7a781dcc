import type { PushSubscriptionJSON } from '@herald/protocol';
import { run } from './commands.js';
import type { Core } from './core.js';
import { base64UrlBytes } from './token.js';

/** The part of a browser's `PushSubscription` the client uses. */
export interface PushSubscriptionLike {
  endpoint: string;
  options?: { applicationServerKey?: ArrayBuffer | null };
  toJSON(): unknown;
  unsubscribe(): Promise<boolean>;
}

/** The part of a `ServiceWorkerRegistration` the client uses: its `pushManager`. */
export interface PushRegistrationLike {
  pushManager: {
    getSubscription(): Promise<PushSubscriptionLike | null>;
    subscribe(options: {
      userVisibleOnly: boolean;
      applicationServerKey: Uint8Array<ArrayBuffer>;
    }): Promise<PushSubscriptionLike>;
  };
}

/** What {@link registerPush} answers: this browser's endpoint and how many the user has registered. */
export interface PushRegistration {
  endpoint: string;
  subscriptions: number;
}

function sameKey(buffer: ArrayBuffer | null | undefined, key: Uint8Array): boolean {
  if (!buffer) return true; // the browser does not say: keep the subscription
  const bytes = new Uint8Array(buffer);
  return bytes.length === key.length && bytes.every((byte, index) => byte === key[index]);
}

/** The deployment's VAPID public key, asked of the server (`push-key`). */
export async function pushPublicKey(c: Core): Promise<string> {
  return ((await run(c, 'push-key', {})) as { publicKey: string }).publicKey;
}

/**
 * Subscribes this browser through `registration.pushManager` (the one it has, if it was made with the
 * same VAPID key; a new one otherwise) and registers it for the user over the socket (`push-subscribe`).
 * The key is the deployment's (`push-key`) unless given. Call it on every page load: it refreshes the
 * subscription's time on the server.
 */
export async function registerPush(
  c: Core,
  options: { registration: PushRegistrationLike; vapidPublicKey?: string },
): Promise<PushRegistration> {
  const publicKey = options.vapidPublicKey ?? (await pushPublicKey(c));
  const key = base64UrlBytes(publicKey);
  const manager = options.registration.pushManager;
  let subscription = await manager.getSubscription();
  if (subscription && !sameKey(subscription.options?.applicationServerKey, key)) {
    await subscription.unsubscribe();
    subscription = null;
  }
  subscription ??= await manager.subscribe({ userVisibleOnly: true, applicationServerKey: key });
  const json = subscription.toJSON() as PushSubscriptionJSON;
  const { subscriptions } = (await run(c, 'push-subscribe', { subscription: json })) as {
    subscriptions: number;
  };
  return { endpoint: json.endpoint, subscriptions };
}

/**
 * Removes this browser's subscription from the user's (`push-unsubscribe`), then unsubscribes it in the
 * browser (sign-out: the next user of this browser must not get this one's pushes). Answers false when
 * the browser had none.
 */
export async function unregisterPush(
  c: Core,
  options: { registration: PushRegistrationLike },
): Promise<boolean> {
  const subscription = await options.registration.pushManager.getSubscription();
  if (!subscription) return false;
  await run(c, 'push-unsubscribe', { endpoint: subscription.endpoint });
  await subscription.unsubscribe();
  return true;
}
