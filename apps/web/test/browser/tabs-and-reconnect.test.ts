import { randomId, waitFor } from '@herald/testing';
import { describe, expect, it } from 'vitest';
import { InboxPage } from '../support/inbox-page.js';
import { stackAndBrowser, type WebStack } from '../support/stack.js';

/**
 * Fails unless every tab shows exactly `sent`, each once, newest first in the inbox's offset order (the
 * order the server stored them in, which workers taking jobs in parallel may make differ from the
 * order they were sent in).
 */
async function expectEveryTabShows(
  stack: WebStack,
  userId: string,
  tabs: readonly InboxPage[],
  sent: readonly string[],
): Promise<void> {
  await waitFor(
    async () => {
      for (const tab of tabs) if ((await tab.shownIds()).length < sent.length) return false;
      return true;
    },
    { what: `${sent.length} notifications in every tab` },
  );
  const stored = await stack.inboxIds(userId);
  expect([...stored].sort()).toEqual([...sent].sort());
  for (const tab of tabs) expect(await tab.shownIds()).toEqual([...stored].reverse());
}

describe('one user, several tabs, a server-side cut (Chromium, the stack as processes)', () => {
  const env = stackAndBrowser();

  it('three tabs share one WebSocket; all show what arrives, a read in one clears every badge, and a closed leader hands over with nothing lost or repeated', async () => {
    const user = randomId('tabs');
    const context = await env.browser.newContext();
    const tabs: InboxPage[] = [];
    for (let i = 0; i < 3; i++) tabs.push(await InboxPage.open(context, env.stack.url, user));
    const sockets = () => tabs.reduce((sum, tab) => sum + tab.openSockets(), 0);
    await waitFor(() => sockets() === 1, { what: 'one open WebSocket' });
    // Exactly one was ever opened across the three tabs: the leader's.
    expect(tabs.map((tab) => tab.sockets.length).reduce((a, b) => a + b)).toBe(1);

    const first = await env.stack.notify(user, { title: 'to every tab' });
    await expectEveryTabShows(env.stack, user, tabs, [first]);
    await waitFor(async () => (await Promise.all(tabs.map((tab) => tab.unread()))).every((n) => n === 1), {
      what: 'every badge at 1',
    });
    // The toast in one tab only.
    await waitFor(async () => (await Promise.all(tabs.map((tab) => tab.toasts.count()))).some((n) => n > 0), {
      what: 'a toast',
    });
    expect((await Promise.all(tabs.map((tab) => tab.toasts.count()))).reduce((a, b) => a + b)).toBe(1);

    // Read in a tab that does not hold the socket: every badge clears.
    const follower = tabs.find((tab) => tab.openSockets() === 0) ?? tabs[2];
    await follower?.articles
      .first()
      .getByRole('button', { name: /^Mark read/ })
      .click();
    await waitFor(async () => (await Promise.all(tabs.map((tab) => tab.unread()))).every((n) => n === 0), {
      what: 'every badge at 0',
    });
    expect(await Promise.all(tabs.map((tab) => tab.badge()))).toEqual(['', '', '']);

    // Close the leader while notifications are on their way: another tab takes over and resumes.
    const leader = tabs.find((tab) => tab.openSockets() === 1);
    if (!leader) throw new Error('no leader tab');
    const rest = tabs.filter((tab) => tab !== leader);
    const before = await env.stack.notify(user, { title: 'just before the leader closes' });
    await leader.page.close();
    const during = [];
    for (let i = 1; i <= 3; i++)
      during.push(await env.stack.notify(user, { title: `during the hand-over ${i}` }));
    await waitFor(() => rest.reduce((sum, tab) => sum + tab.openSockets(), 0) === 1, {
      what: 'a new leader with its socket',
    });
    const after = await env.stack.notify(user, { title: 'after the hand-over' });
    await expectEveryTabShows(env.stack, user, rest, [first, before, ...during, after]);
    await waitFor(async () => (await Promise.all(rest.map((tab) => tab.unread()))).every((n) => n === 5), {
      what: 'both badges at 5',
    }).catch(async (error) => {
      throw new Error(
        `badges ${JSON.stringify(await Promise.all(rest.map((tab) => tab.unread())))}, server ${await env.stack.unread(user)}, sockets ${rest.map((tab) => tab.openSockets())}`,
        { cause: error },
      );
    });
    expect(await env.stack.unread(user)).toBe(5);
    await context.close();
  });

  it('the realtime server is killed and another starts: the 5 sent meanwhile appear once, in order, and the indicator goes reconnecting → offline → live', async () => {
    const user = randomId('cut');
    const context = await env.browser.newContext();
    const tab = await InboxPage.open(context, env.stack.url, user);
    const earlier = await env.stack.notify(user, { title: 'before the cut' });
    await waitFor(async () => (await tab.shownIds()).length === 1, { what: 'the first notification' });
    // Every state the indicator shows from now on, in order.
    await tab.page.evaluate(() => {
      const indicator = document.querySelector('herald-inbox')?.shadowRoot?.querySelector('.connection');
      const states: string[] = [indicator?.getAttribute('data-state') ?? ''];
      (window as unknown as { states: string[] }).states = states;
      if (!indicator) return;
      new MutationObserver(() => {
        const state = indicator.getAttribute('data-state') ?? '';
        if (states.at(-1) !== state) states.push(state);
      }).observe(indicator, { attributes: true, attributeFilter: ['data-state'] });
    });

    await env.stack.killRealtime();
    await tab.waitForState('reconnecting');
    const missed = [];
    for (let i = 1; i <= 5; i++) missed.push(await env.stack.notify(user, { title: `missed ${i}` }));
    // The browser goes offline too (Chromium's emulation): the indicator says so rather than
    // "reconnecting", and coming back online retries at once.
    await context.setOffline(true);
    await tab.waitForState('offline');
    await env.stack.startRealtime('rt-2');
    await context.setOffline(false);
    await tab.waitForState('live', 60_000);

    await expectEveryTabShows(env.stack, user, [tab], [earlier, ...missed]);
    expect((await tab.titles()).at(-1)).toBe('before the cut');
    await waitFor(async () => (await tab.unread()) === 6, { what: 'the badge at 6' });
    const states = await tab.page.evaluate(() => (window as unknown as { states: string[] }).states);
    expect(states[0]).toBe('live');
    expect(states.at(-1)).toBe('live');
    expect(states.indexOf('reconnecting')).toBeGreaterThan(0);
    expect(states.indexOf('offline')).toBeGreaterThan(states.indexOf('reconnecting'));
    console.log(`indicator during the cut: ${states.join(' → ')}`);
    // Replayed notifications are not news: no toast for them.
    expect(await tab.toasts.allTextContents()).not.toContainEqual(expect.stringContaining('missed'));
    await context.close();
  });
});
