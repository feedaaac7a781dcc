import { createECDH, randomBytes } from 'node:crypto';
import { ErrorCode, type PushSubscriptionJSON } from '@herald/protocol';
import { PushSubscriptions } from '@herald/push';
import { describe, expect, it } from 'vitest';
import {
  HeraldError,
  heraldPushMessage,
  type PushRegistrationLike,
  type PushSubscriptionLike,
} from '../src/index.js';
import { live, record } from './support/recorder.js';
import { perTest, randomId } from './support/stack.js';

function keyPair(): { publicKey: string; privateKey: string } {
  const ecdh = createECDH('prime256v1');
  ecdh.generateKeys();
  return { publicKey: ecdh.getPublicKey('base64url'), privateKey: ecdh.getPrivateKey('base64url') };
}

/**
 * A stand-in for a browser's `ServiceWorkerRegistration.pushManager` (Node and headless Chromium have no
 * push service): it makes subscriptions with real P-256 keys, as a browser would, and records calls.
 */
function browserPush(endpointHost = 'push.example.com') {
  const calls: { subscribe: Uint8Array[]; unsubscribed: string[] } = { subscribe: [], unsubscribed: [] };
  let current: PushSubscriptionLike | null = null;
  const make = (applicationServerKey: Uint8Array): PushSubscriptionLike => {
    const json: PushSubscriptionJSON = {
      endpoint: `https://${endpointHost}/send/${randomId('sub')}`,
      expirationTime: null,
      keys: { p256dh: keyPair().publicKey, auth: randomBytes(16).toString('base64url') },
    };
    const subscription: PushSubscriptionLike = {
      endpoint: json.endpoint,
      options: { applicationServerKey: applicationServerKey.slice().buffer },
      toJSON: () => json,
      unsubscribe: async () => {
        calls.unsubscribed.push(json.endpoint);
        if (current === subscription) current = null;
        return true;
      },
    };
    return subscription;
  };
  const registration: PushRegistrationLike = {
    pushManager: {
      getSubscription: async () => current,
      subscribe: async ({ applicationServerKey }) => {
        calls.subscribe.push(applicationServerKey);
        current = make(applicationServerKey);
        return current;
      },
    },
  };
  return { registration, calls, current: () => current };
}

describe('registerPush / unregisterPush against a real realtime server and Redis', () => {
  const each = perTest();
  const vapid = keyPair();
  const env = {
    HERALD_VAPID_PUBLIC_KEY: vapid.publicKey,
    HERALD_VAPID_PRIVATE_KEY: vapid.privateKey,
    HERALD_VAPID_SUBJECT: 'mailto:ops@example.com',
  };

  it('subscribes with the deployment’s VAPID key and registers the browser’s subscription for its user; unregister removes it', async () => {
    const { stack, 'rt-a': a } = await each.start(['rt-a'], env);
    const user = randomId('alice');
    const alice = each.track(record({ tabs: false, url: a.url, getToken: () => stack.token(user) }));
    await live(alice);
    const store = new PushSubscriptions(stack.redis, stack.env.HERALD_INBOX_PREFIX ?? '');
    const browser = browserPush();

    const registered = await alice.client.registerPush({ registration: browser.registration });
    expect(Buffer.from(browser.calls.subscribe[0] ?? []).toString('base64url')).toBe(vapid.publicKey);
    expect(registered).toEqual({ endpoint: browser.current()?.endpoint, subscriptions: 1 });
    expect(await store.list('default', user)).toEqual([browser.current()?.toJSON()]);

    // Again (the next page load): the same subscription, refreshed, not a second one.
    expect(await alice.client.registerPush({ registration: browser.registration })).toEqual(registered);
    expect(browser.calls.subscribe).toHaveLength(1);

    // A subscription made with another key (the operator rotated it) is replaced.
    const rotated = keyPair().publicKey;
    const again = await alice.client.registerPush({
      registration: browser.registration,
      vapidPublicKey: rotated,
    });
    expect(browser.calls.unsubscribed).toEqual([registered.endpoint]);
    expect(Buffer.from(browser.calls.subscribe[1] ?? []).toString('base64url')).toBe(rotated);
    expect(again.subscriptions).toBe(2);

    expect(await alice.client.unregisterPush({ registration: browser.registration })).toBe(true);
    expect(browser.current()).toBeNull();
    expect((await store.list('default', user)).map((s) => s.endpoint)).toEqual([registered.endpoint]);
    expect(await alice.client.unregisterPush({ registration: browser.registration })).toBe(false);
  });

  it('a refused subscription (a loopback endpoint, private addresses not allowed) rejects with its code', async () => {
    const { stack, 'rt-a': a } = await each.start(['rt-a'], env);
    const user = randomId('bob');
    const bob = each.track(record({ tabs: false, url: a.url, getToken: () => stack.token(user) }));
    await live(bob);
    const refused = await bob.client
      .registerPush({ registration: browserPush('127.0.0.1').registration })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(HeraldError);
    expect((refused as HeraldError).code).toBe(ErrorCode.PUSH_ENDPOINT_REFUSED);
  });

  it('heraldPushMessage picks Herald’s messages out of a service worker’s push events', () => {
    const message = { kind: 'herald.notification', id: 'n-1', offset: '1-1', userId: 'a', createdAt: 'x' };
    expect(heraldPushMessage(message)).toEqual(message);
    expect(heraldPushMessage({ title: 'someone else’s' })).toBeUndefined();
    expect(heraldPushMessage(undefined)).toBeUndefined();
  });
});
