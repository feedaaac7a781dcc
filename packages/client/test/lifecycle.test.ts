import { waitFor } from '@herald/testing';
import { describe, expect, it } from 'vitest';
import type { PageLike } from '../src/index.js';
import { itemIds, live, once, record } from './support/recorder.js';
import { connections, notify, perTest, randomId } from './support/stack.js';

/** A page as the client sees it: `window` events, `document` visibility and focus, `navigator.onLine`. */
function fakePage(): PageLike & EventTarget & { navigator: { onLine: boolean } } {
  const document = Object.assign(new EventTarget(), { visibilityState: 'visible', hasFocus: () => true });
  return Object.assign(new EventTarget(), { document, navigator: { onLine: true } });
}

describe('page lifecycle: back/forward cache, online', () => {
  const each = perTest();

  it('closes the socket on pagehide (bfcache-eligible) and resumes from the last offset on pageshow', async () => {
    const { stack: s, gateway, 'rt-a': a } = await each.start(['gateway', 'rt-a', 'worker']);
    const user = randomId('alice');
    const page = fakePage();
    const alice = each.track(record({ url: a.url, tabs: false, page, getToken: () => s.token(user) }));
    await live(alice);
    const first = await notify(gateway, user, 1);
    await waitFor(() => itemIds(alice).length === 1, { what: 'first' });

    page.dispatchEvent(new Event('pagehide'));
    expect(alice.client.getState().connection).toBe('offline');
    await waitFor(async () => (await connections(a)) === 0, { what: 'socket closed' });
    const away = await notify(gateway, user, 2, 1);

    page.dispatchEvent(Object.assign(new Event('pageshow'), { persisted: true }));
    await live(alice, 'live after pageshow');
    await waitFor(() => itemIds(alice).length === 3, { what: 'missed ones replayed' });
    expect(itemIds(alice)).toEqual([...first, ...away]);
    expect(alice.resumes.at(-1)).toEqual({
      recovered: true,
      wasRecovering: true,
      replayed: 2,
      resynced: false,
    });
    expect(once(alice.notifications)).toBe(true);
  });

  it('retries at once on `online` instead of waiting out the backoff', async () => {
    const { stack: s, 'rt-a': a, 'rt-b': b } = await each.start(['rt-a', 'rt-b']);
    const user = randomId('bob');
    const page = fakePage();
    const urls = [a.url, b.url];
    let turn = 0;
    const bob = each.track(
      record({
        url: () => urls[turn++ % 2] as string,
        tabs: false,
        page,
        // Every retry would wait 20 s: only `online` can bring it back within the deadline below.
        backoff: { minMs: 20_000, maxMs: 20_000 },
        getToken: () => s.token(user),
      }),
    );
    await live(bob);
    page.navigator.onLine = false;
    await a.stop('SIGKILL');
    await waitFor(() => bob.client.getState().connection === 'offline', { what: 'offline' });
    page.navigator.onLine = true;
    page.dispatchEvent(new Event('online'));
    await waitFor(() => bob.client.getState().connection === 'live', {
      timeoutMs: 10_000,
      what: 'live on rt-b',
    });
    expect(await connections(b)).toBe(1);
  });
});
