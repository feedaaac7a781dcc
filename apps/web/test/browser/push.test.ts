import { createECDH, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_TENANT, type PushMessage } from '@herald/protocol';
import { PushSubscriptions } from '@herald/push';
import { loopbackCertificate, randomId, testRedis, waitFor } from '@herald/testing';
// @ts-expect-error: http_ece has no types (the library web-push encrypts with)
import ece from 'http_ece';
import type { Cluster, Redis } from 'ioredis';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InboxPage } from '../support/inbox-page.js';
import { stackAndBrowser } from '../support/stack.js';

/**
 * Web Push on the inbox page, in Chromium, against the stack as processes: "Turn on push" registers the
 * browser through the page's service worker and the SDK, the worker sends a notification that no tab
 * acked as an encrypted push, and the service worker shows it once.
 *
 * Headless Chromium reaches no push service (FCM), so the test stands in for it at both ends, and for
 * nothing else: `pushManager.subscribe` answers a subscription whose endpoint is this test's HTTPS
 * server and whose keys it made (the page's code, the SDK and the servers are untouched), and what
 * that server receives is decrypted (RFC 8291, as the browser would) and handed to the page's service
 * worker through the DevTools protocol (`ServiceWorker.deliverPushMessage`), as the browser's push
 * service would.
 */
const dir = mkdtempSync(join(tmpdir(), 'herald-web-push-'));
const { cert: certFile, key: keyFile } = loopbackCertificate(dir);
const vapid = createECDH('prime256v1');
vapid.generateKeys();

/** The browser's push keys (what `pushManager.subscribe` would make): the test decrypts with them. */
const browserKeys = createECDH('prime256v1');
browserKeys.generateKeys();
const auth = randomBytes(16).toString('base64url');

describe('Web Push on the inbox page, in Chromium', () => {
  const env = stackAndBrowser({
    HERALD_VAPID_PUBLIC_KEY: vapid.getPublicKey('base64url'),
    HERALD_VAPID_PRIVATE_KEY: vapid.getPrivateKey('base64url'),
    HERALD_VAPID_SUBJECT: 'mailto:ops@example.com',
    // The stand-in push service is on loopback (tests only) with its own certificate.
    HERALD_PUSH_ALLOW_PRIVATE: 'true',
    NODE_EXTRA_CA_CERTS: certFile,
  });
  const received: PushMessage[] = [];
  let pushService: Server;
  let redis: Redis | Cluster;
  let subscriptions: PushSubscriptions;
  let endpoint: string;

  beforeAll(async () => {
    redis = testRedis();
    subscriptions = new PushSubscriptions(redis, env.stack.env.HERALD_INBOX_PREFIX ?? '');
    pushService = createServer(
      { cert: readFileSync(certFile), key: readFileSync(keyFile) },
      (request, response) => {
        const chunks: Buffer[] = [];
        request.on('data', (chunk: Buffer) => chunks.push(chunk));
        request.on('end', () => {
          const plain = ece.decrypt(Buffer.concat(chunks), {
            version: 'aes128gcm',
            privateKey: browserKeys,
            authSecret: auth,
          }) as Buffer;
          received.push(JSON.parse(plain.toString('utf8')) as PushMessage);
          response.writeHead(201).end();
        });
      },
    );
    await new Promise<void>((resolve) => pushService.listen(0, '127.0.0.1', resolve));
    endpoint = `https://127.0.0.1:${(pushService.address() as AddressInfo).port}/push/${randomId('sub')}`;
  });

  afterAll(async () => {
    // Not started when an earlier hook failed: `close` would then never call back and the hook time out.
    if (pushService !== undefined) {
      pushService.closeAllConnections();
      await new Promise((resolve) => pushService.close(resolve));
    }
    redis?.disconnect();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A context whose pages get the stand-in subscription from `pushManager` (see the file's comment). */
  async function pushContext(): Promise<BrowserContext> {
    const context = await env.browser.newContext();
    await context.grantPermissions(['notifications'], { origin: env.stack.url });
    await context.addInitScript(
      ({ endpoint, p256dh, auth }) => {
        // A browser keeps its subscription across pages and reloads: so does the stand-in (per origin).
        const STORED = 'herald-test-push-subscription';
        const make = () =>
          ({
            endpoint,
            expirationTime: null,
            options: { applicationServerKey: null, userVisibleOnly: true },
            toJSON: () => ({ endpoint, expirationTime: null, keys: { p256dh, auth } }),
            unsubscribe: async () => {
              localStorage.removeItem(STORED);
              return true;
            },
          }) as unknown as PushSubscription;
        PushManager.prototype.getSubscription = async () => (localStorage.getItem(STORED) ? make() : null);
        PushManager.prototype.subscribe = async () => {
          localStorage.setItem(STORED, '1');
          return make();
        };
      },
      { endpoint, p256dh: browserKeys.getPublicKey('base64url'), auth },
    );
    return context;
  }

  /** What the page's service worker shows (`registration.getNotifications()`), as `title|tag`. */
  function shownBySystem(page: Page): Promise<string[]> {
    return page.evaluate(async () => {
      const registration = await navigator.serviceWorker.getRegistration('/herald-sw.js');
      return ((await registration?.getNotifications()) ?? []).map((n) => `${n.title}|${n.tag}`);
    });
  }

  /** Hands `message` to the origin's service worker as the browser's push service would. */
  async function deliver(context: BrowserContext, message: PushMessage): Promise<void> {
    // From a page of another origin: no window of the inbox is open to the service worker.
    const blank = await context.newPage();
    const cdp = await context.newCDPSession(blank);
    const registrations: { registrationId: string; scopeURL: string; isDeleted: boolean }[] = [];
    cdp.on('ServiceWorker.workerRegistrationUpdated', (event) => registrations.push(...event.registrations));
    await cdp.send('ServiceWorker.enable');
    const origin = new URL(env.stack.url).origin;
    await waitFor(() => registrations.some((r) => r.scopeURL === `${origin}/` && !r.isDeleted), {
      what: 'the service worker registration',
    });
    const registration = registrations.find((r) => r.scopeURL === `${origin}/` && !r.isDeleted);
    await cdp.send('ServiceWorker.deliverPushMessage', {
      origin,
      registrationId: registration?.registrationId ?? '',
      data: JSON.stringify(message),
    });
    await cdp.detach();
    await blank.close();
  }

  it('turned on from the page, a notification no tab acked comes as a push, shown once; the page then closes it', async () => {
    const user = randomId('push');
    const context = await pushContext();
    const inbox = await InboxPage.open(context, env.stack.url, user);
    const button = inbox.page.getByRole('button', { name: 'Turn on push' });
    await button.click();
    const status = inbox.page.locator('#push-state');
    expect(await status.getAttribute('role')).toBe('status');
    await waitFor(async () => /^Push is on/.test((await status.textContent()) ?? ''), { what: 'push on' });
    expect(await status.textContent()).toContain('(1 browser)');
    expect(await inbox.page.getByRole('button', { name: 'Turn off push' }).getAttribute('aria-pressed')).toBe(
      'true',
    );

    // Every tab closed: nobody acks, so the worker escalates after 1 s.
    await inbox.page.close();
    const id = await env.stack.notify(
      user,
      { title: 'Your table is ready', body: 'Table 4' },
      { escalateAfterMs: 1000 },
    );
    await waitFor(() => received.some((message) => message.id === id), {
      timeoutMs: 20_000,
      what: 'the push',
    });
    const message = received.find((pushed) => pushed.id === id) as PushMessage;
    expect(message).toMatchObject({
      kind: 'herald.notification',
      id,
      userId: user,
      payload: { title: 'Your table is ready' },
    });

    // The service worker shows it; the same push again replaces it (one per id).
    await deliver(context, message);
    await deliver(context, message);
    const probe = await context.newPage();
    await probe.goto(`${env.stack.url}/healthz`);
    await waitFor(async () => (await shownBySystem(probe)).length === 1, { what: 'the system notification' });
    expect(await shownBySystem(probe)).toEqual([`Your table is ready|${id}`]);

    // Back on the inbox: the notification is in the list once, and its system twin is closed.
    await probe.goto(`${env.stack.url}/?user=${encodeURIComponent(user)}`);
    const back = new InboxPage(probe);
    await waitFor(async () => (await back.shownIds()).includes(id), { what: 'the notification in the list' });
    expect(await back.shownIds()).toEqual([id]);
    await waitFor(async () => (await shownBySystem(probe)).length === 0, {
      what: 'the system notification closed',
    });
    // Push is still on for this browser (registered again on load).
    await waitFor(
      async () => /^Push is on/.test((await back.page.locator('#push-state').textContent()) ?? ''),
      {
        what: 'push on after a reload',
      },
    );
    await context.close();
  });

  it('a push that arrives while a tab of the inbox is visible is not shown again; turned off, the server forgets the browser', async () => {
    const user = randomId('push-visible');
    const context = await pushContext();
    const inbox = await InboxPage.open(context, env.stack.url, user);
    await inbox.page.getByRole('button', { name: 'Turn on push' }).click();
    await waitFor(async () => (await subscriptions.list(DEFAULT_TENANT, user)).length === 1, {
      what: 'the subscription stored',
    });
    expect((await subscriptions.list(DEFAULT_TENANT, user))[0]?.endpoint).toBe(endpoint);
    const pushed = (title: string): PushMessage => ({
      kind: 'herald.notification',
      id: randomId('n'),
      offset: '1-1',
      userId: user,
      createdAt: new Date().toISOString(),
      payload: { title },
    });
    // The tab is visible: it shows what it gets from its socket, the service worker shows nothing. The
    // worker's look at its windows is counted, so that the tab closes only once it has been made.
    const worker = await waitFor(() => context.serviceWorkers()[0], { what: 'the service worker' });
    await worker.evaluate(() => {
      type MatchAll = (options?: unknown) => Promise<unknown[]>;
      const scope = self as unknown as { clients: { matchAll: MatchAll }; looked: number };
      const matchAll = scope.clients.matchAll.bind(scope.clients);
      scope.looked = 0;
      scope.clients.matchAll = async (options) => {
        const found = await matchAll(options);
        scope.looked++;
        return found;
      };
    });
    await deliver(context, pushed('raced the socket'));
    await waitFor(
      async () => (await worker.evaluate(() => (self as unknown as { looked: number }).looked)) === 1,
      {
        what: 'the service worker to look for a visible tab',
      },
    );
    // No tab left: the next one is shown. The worker handles pushes in order, so the first is settled.
    await inbox.page.close();
    await deliver(context, pushed('while away'));
    const probe = await context.newPage();
    await probe.goto(`${env.stack.url}/healthz`);
    await waitFor(async () => (await shownBySystem(probe)).length > 0, { what: 'a system notification' });
    expect((await shownBySystem(probe)).map((shown) => shown.split('|')[0])).toEqual(['while away']);

    // Turned off: the server forgets this browser.
    await probe.goto(`${env.stack.url}/?user=${encodeURIComponent(user)}`);
    const off = probe.getByRole('button', { name: 'Turn off push' });
    await waitFor(async () => (await off.count()) === 1, { what: 'push on after the reload' });
    await off.click();
    await waitFor(async () => (await subscriptions.list(DEFAULT_TENANT, user)).length === 0, {
      what: 'the subscription removed',
    });
    // The server forgets it first, then the page says so.
    await waitFor(
      async () => (await probe.locator('#push-state').textContent()) === 'Push is off for this browser.',
      {
        what: 'the page saying push is off',
      },
    );
    await context.close();
  });
});
