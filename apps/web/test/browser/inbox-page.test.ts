import { randomId, waitFor } from '@herald/testing';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { axeViolations } from '../support/axe.js';
import { InboxPage, screenshotPath } from '../support/inbox-page.js';
import { stackAndBrowser } from '../support/stack.js';

/** The focused element, looking through shadow roots: `TAG "accessible text"`. */
function focused(page: Page): Promise<string> {
  return page.evaluate(() => {
    let element = document.activeElement;
    while (element?.shadowRoot?.activeElement) element = element.shadowRoot.activeElement;
    if (!element) return 'nothing';
    const text = element.getAttribute('aria-label') ?? element.textContent ?? '';
    return `${element.tagName} ${text.trim().replace(/\s+/g, ' ').slice(0, 80)}`;
  });
}

/**
 * Puts `body` (with its `<herald-inbox>`) in `page`, and `head` when given, then loads the element's
 * module script from `herald`, as a page of another site does.
 */
async function embed(page: Page, herald: string, body: string, head?: string): Promise<void> {
  await page.evaluate(
    ({ herald, body, head }) => {
      if (head !== undefined) document.head.innerHTML = head;
      document.body.innerHTML = body;
      const script = document.createElement('script');
      script.type = 'module';
      script.src = `${herald}/element/herald-inbox.js`;
      document.head.append(script);
    },
    { herald, body, head },
  );
}

describe('the inbox page, in Chromium, against the stack as processes', () => {
  const env = stackAndBrowser();

  /** Sends `titles` to `userId` one at a time, each once `inbox` shows it (so their order is fixed). */
  async function sendInTurn(inbox: InboxPage, userId: string, titles: readonly string[]): Promise<void> {
    const before = (await inbox.titles()).length;
    for (const [index, title] of titles.entries()) {
      await env.stack.notify(userId, { title });
      await waitFor(async () => (await inbox.titles()).length === before + index + 1, { what: title });
    }
  }

  it('a notification sent over HTTP appears as a toast and in the list, and the badge goes up by one', async () => {
    // The stack's inbox prefix is its own: a plain name is alone here (and reads well in the screenshot).
    const user = 'alice';
    const context = await env.browser.newContext({ viewport: { width: 900, height: 700 } });
    const inbox = await InboxPage.open(context, env.stack.url, user);
    expect(await inbox.unread()).toBe(0);
    expect(await inbox.badge()).toBe('');
    // The page says whose inbox it is: the user the demo token route minted for.
    expect(await inbox.page.locator('#who').textContent()).toBe(user);

    const sentAt = Date.now();
    const id = await env.stack.notify(user, {
      title: 'Your order has shipped',
      body: 'Parcel 4411 is on its way.',
    });
    await waitFor(async () => (await inbox.toasts.count()) === 1, { what: 'the toast' });
    const toastMs = Date.now() - sentAt;
    await waitFor(async () => (await inbox.shownIds()).length === 1, { what: 'the article' });
    const listedMs = Date.now() - sentAt;
    console.log(`HTTP POST /notify → toast on screen: ${toastMs} ms; in the list: ${listedMs} ms`);

    expect(await inbox.toasts.first().textContent()).toContain('Your order has shipped');
    expect(await inbox.shownIds()).toEqual([id]);
    await waitFor(async () => (await inbox.unread()) === 1, { what: 'the badge at 1' });
    expect(await inbox.badge()).toBe('1');
    expect(await inbox.articles.first().getAttribute('class')).toContain('unread');

    // Two more, for the screenshot of the README (docs/inbox.png is a copy of this one).
    await env.stack.notify(user, { title: 'Maya commented on your post', body: '“Great write-up, thanks!”' });
    await env.stack.notify(user, { title: 'Build #212 passed', body: 'main · 4 m 12 s' });
    await waitFor(async () => (await inbox.unread()) === 3, { what: 'the badge at 3' });
    await inbox.articles
      .nth(2)
      .getByRole('button', { name: /^Mark read/ })
      .click();
    await waitFor(async () => (await inbox.unread()) === 2, { what: 'the badge at 2' });
    await inbox.page.screenshot({ path: screenshotPath('inbox') });
    await context.close();
  });

  it('scrolled down in the list, new notifications wait behind "N new" and nothing on the page shifts', async () => {
    const user = randomId('scroll');
    const context = await env.browser.newContext({ viewport: { width: 800, height: 480 } });
    const inbox = await InboxPage.open(context, env.stack.url, user);
    for (let i = 1; i <= 8; i++)
      await env.stack.notify(user, { title: `older ${i}`, body: 'a line of text' });
    await waitFor(async () => (await inbox.titles()).length === 8, { what: 'eight articles' });
    await inbox.page.locator('.feed').evaluate((feed) => {
      feed.scrollTop = 150;
    });
    await waitFor(async () => (await inbox.page.locator('.feed').evaluate((feed) => feed.scrollTop)) > 100, {
      what: 'the feed scrolled',
    });
    const topBefore = await inbox.articles.first().boundingBox();
    // Layout shifts from now on (the Layout Instability API), none expected.
    await inbox.page.evaluate(() => {
      const shifts: number[] = [];
      (window as unknown as { shifts: number[] }).shifts = shifts;
      new PerformanceObserver((list) => {
        for (const entry of list.getEntries()) shifts.push((entry as unknown as { value: number }).value);
      }).observe({ type: 'layout-shift' });
    });

    await env.stack.notify(user, { title: 'newest' });
    const button = inbox.page.getByRole('button', { name: '1 new' });
    await waitFor(() => button.isVisible(), { what: 'the "1 new" button' });
    await waitFor(async () => (await inbox.unread()) === 9 && (await inbox.toasts.count()) > 0, {
      what: 'the badge at 9 and the toast',
    });
    expect(await inbox.titles()).not.toContain('newest');
    expect(await inbox.articles.first().boundingBox()).toEqual(topBefore);
    expect(await inbox.page.evaluate(() => (window as unknown as { shifts: number[] }).shifts)).toEqual([]);

    await button.click();
    await waitFor(async () => (await inbox.titles())[0] === 'newest', { what: 'the newest on top' });
    expect(await inbox.titles()).toHaveLength(9);
    expect(await button.isVisible()).toBe(false);
    await context.close();
  });

  it('a reload keeps the inbox, its read marks and the count', async () => {
    const user = randomId('reload');
    const context = await env.browser.newContext();
    const inbox = await InboxPage.open(context, env.stack.url, user);
    // One at a time: workers take queued notifications in parallel, so only this fixes their order.
    await sendInTurn(inbox, user, ['one', 'two', 'three']);
    await inbox.articles
      .filter({ hasText: 'two' })
      .getByRole('button', { name: /^Mark read/ })
      .click();
    await waitFor(async () => (await inbox.unread()) === 2, { what: 'the badge at 2' });

    await inbox.page.reload();
    await inbox.waitForState('live');
    await waitFor(async () => (await inbox.titles()).length === 3, { what: 'the inbox after the reload' });
    expect(await inbox.titles()).toEqual(['three', 'two', 'one']);
    expect(await inbox.unread()).toBe(2);
    expect(await inbox.articles.filter({ hasText: 'two' }).getAttribute('class')).not.toContain('unread');
    expect(await env.stack.unread(user)).toBe(2);
    await context.close();
  });

  it('two users in two browser contexts see only their own notifications and counts', async () => {
    const [ana, ben] = [randomId('ana'), randomId('ben')];
    const [contextA, contextB] = await Promise.all([env.browser.newContext(), env.browser.newContext()]);
    const [inboxA, inboxB] = await Promise.all([
      InboxPage.open(contextA, env.stack.url, ana),
      InboxPage.open(contextB, env.stack.url, ben),
    ]);
    await sendInTurn(inboxA, ana, ['for ana 1']);
    await env.stack.notify(ben, { title: 'for ben' });
    await env.stack.notify(ana, { title: 'for ana 2' });
    await waitFor(async () => (await inboxA.unread()) === 2 && (await inboxB.unread()) === 1, {
      what: 'both badges',
    });
    await waitFor(async () => (await inboxA.titles()).length === 2 && (await inboxB.titles()).length === 1, {
      what: 'both lists',
    });
    expect(await inboxA.titles()).toEqual(['for ana 2', 'for ana 1']);
    expect(await inboxB.titles()).toEqual(['for ben']);
    // Each toast stayed with its own user.
    expect(await inboxB.toasts.allTextContents()).toEqual([expect.stringContaining('for ben')]);
    await Promise.all([contextA.close(), contextB.close()]);
  });

  it('<herald-inbox> embeds in a page of another origin: the page’s styles stay out of it and its styles stay in', async () => {
    const user = randomId('embed');
    const context = await env.browser.newContext();
    const page = await context.newPage();
    // A hostile host page on another origin than the element's: the page at localhost, the element
    // and the realtime servers at 127.0.0.1 (a module script from elsewhere needs CORS), the token
    // route on the page's own origin, as a site's backend would be. Built over a real response:
    // Chromium's local network access checks block a page that `route.fulfill` made up.
    const inbox = new InboxPage(page);
    const elsewhere = env.stack.url.replace('127.0.0.1', 'localhost');
    await page.goto(`${elsewhere}/healthz`);
    await embed(
      page,
      env.stack.url,
      `<p class="badge">the host's own .badge</p>
        <herald-inbox token-url="/dev/token" url="${env.stack.url}" user="${user}"></herald-inbox>`,
      `<title>Host page</title><style>
        * { font-family: serif !important; color: rgb(255, 0, 0) !important; }
        button { display: none !important; }
        p.badge { background: rgb(0, 255, 0); }
      </style>`,
    );
    await inbox.waitForState('live');
    // Closed behind the bell by default; the page's `button { display: none }` does not reach it.
    expect(await inbox.bell.isVisible()).toBe(true);
    expect(await inbox.bell.getAttribute('aria-expanded')).toBe('false');
    await inbox.bell.click();
    await env.stack.notify(user, { title: 'Embedded' });
    await waitFor(async () => (await inbox.unread()) === 1 && (await inbox.titles()).length === 1, {
      what: 'the notification in the embed',
    });
    const inside = await page.locator('.entry-title').evaluate((title) => {
      const style = getComputedStyle(title);
      return { color: style.color, font: style.fontFamily };
    });
    expect(inside.color).not.toBe('rgb(255, 0, 0)');
    expect(inside.font).toContain('system-ui');
    // The element's `.badge` (absolute, red) does not style the page's `.badge`.
    const outside = await page.locator('p.badge').evaluate((badge) => {
      const style = getComputedStyle(badge);
      return { position: style.position, background: style.backgroundColor };
    });
    expect(outside).toEqual({ position: 'static', background: 'rgb(0, 255, 0)' });
    await context.close();
  });

  it('<herald-inbox> stops asking a token-url that refuses its request (400), as it does when signed out', async () => {
    const context = await env.browser.newContext();
    const page = await context.newPage();
    const asked: number[] = [];
    page.on('response', (response) => {
      if (response.url().endsWith('/dev/token')) asked.push(response.status());
    });
    await page.goto(`${env.stack.url}/healthz`);
    // "a b" is no user id: the token route answers 400 to every attempt.
    await embed(page, env.stack.url, '<herald-inbox token-url="/dev/token" user="a b"></herald-inbox>');
    const inbox = new InboxPage(page);
    await inbox.waitForState('unauthorized');
    expect(asked).toEqual([400]);
    await context.close();
  });

  it('<herald-inbox> says why it is not connected yet while its token-url fails (500), and keeps trying', async () => {
    const context = await env.browser.newContext();
    const page = await context.newPage();
    let asked = 0;
    await page.route('**/broken-token', (route) => {
      asked++;
      return route.fulfill({ status: 500, contentType: 'application/json', body: '{"error":"down"}' });
    });
    await page.goto(`${env.stack.url}/healthz`);
    await embed(page, env.stack.url, '<herald-inbox token-url="/broken-token" open></herald-inbox>');
    const problem = page.locator('herald-inbox .problem');
    await problem.waitFor({ timeout: 10_000 });
    expect(await problem.textContent()).toContain('/broken-token answered 500');
    await waitFor(() => asked >= 2, { what: 'a second try' });
    expect(await new InboxPage(page).state()).toBe('connecting');
    await context.close();
  });

  it('<herald-inbox> whose token-url answers a page (a sign-in page after a redirect) is signed out, saying so, and stops asking', async () => {
    const context = await env.browser.newContext();
    const page = await context.newPage();
    let asked = 0;
    await page.route('**/session-token', (route) => {
      asked++;
      return route.fulfill({
        status: 200,
        contentType: 'text/html',
        body: '<!doctype html><title>Sign in</title>',
      });
    });
    await page.goto(`${env.stack.url}/healthz`);
    await embed(page, env.stack.url, '<herald-inbox token-url="/session-token" open></herald-inbox>');
    const inbox = new InboxPage(page);
    // Before: "Unexpected token '<'" and a retry every few seconds, for good.
    await inbox.waitForState('unauthorized');
    expect(await page.locator('herald-inbox .inbox').textContent()).toContain(
      '/session-token answered 200 without a token',
    );
    const after = asked;
    expect(after).toBe(1);
    await context.close();
  });

  it('an action pressed while not live says it could not be done (before: dropped without a word, the button as usable as ever); live again, it works', async () => {
    const user = randomId('offline-actions');
    const context = await env.browser.newContext();
    const inbox = await InboxPage.open(context, env.stack.url, user);
    await env.stack.notify(user, { title: 'to read' });
    await waitFor(async () => (await inbox.unread()) === 1, { what: 'the badge at 1' });
    await context.setOffline(true);
    await inbox.waitForState('offline');
    const problem = inbox.page.getByRole('alert');
    for (const name of [/^Mark read: to read/, /^Mark all read$/]) {
      await inbox.page.getByRole('button', { name }).click();
      await waitFor(
        async () => /Could not mark (all )?read: not connected/.test((await problem.textContent()) ?? ''),
        {
          what: `the problem of ${name}`,
        },
      );
    }
    expect(await inbox.unread()).toBe(1);
    await context.setOffline(false);
    await inbox.waitForState('live', 60_000);
    expect(await problem.count()).toBe(0);
    await inbox.page.getByRole('button', { name: /^Mark read: to read/ }).click();
    await waitFor(async () => (await inbox.unread()) === 0, { what: 'read once live' });
    await context.close();
  });

  it('<herald-inbox> follows a change of its user (a sign-out then sign-in in a single-page app): the new user’s inbox, none of the old one’s', async () => {
    const [alice, bob] = [randomId('spa-a'), randomId('spa-b')];
    const context = await env.browser.newContext();
    const page = await context.newPage();
    await page.goto(`${env.stack.url}/healthz`);
    await embed(
      page,
      env.stack.url,
      `<herald-inbox token-url="/dev/token" user="${alice}" open></herald-inbox>`,
    );
    const inbox = new InboxPage(page);
    await inbox.waitForState('live');
    await env.stack.notify(alice, { title: 'for alice' });
    await waitFor(async () => (await inbox.titles()).includes('for alice'), { what: 'alice’s notification' });

    await page.evaluate(
      (userId) => document.querySelector('herald-inbox')?.setAttribute('user', userId),
      bob,
    );
    await env.stack.notify(bob, { title: 'for bob' });
    await waitFor(async () => (await inbox.titles()).includes('for bob'), { what: 'bob’s notification' });
    expect(await inbox.titles()).toEqual(['for bob']);
    await context.close();
  });

  it('a payload’s text stays in its box: a long unbroken title wraps, a bidi override does not turn the UI’s words', async () => {
    const user = randomId('hostile-text');
    const context = await env.browser.newContext({ viewport: { width: 800, height: 700 } });
    const inbox = await InboxPage.open(context, env.stack.url, user);
    await sendInTurn(inbox, user, [`https://example.com/${'x'.repeat(400)}`]);
    // U+202E RIGHT-TO-LEFT OVERRIDE: within the title it is the sender's business; it used to reverse
    // the toast's own words after it too ("(and 1 more)" read "(erom 1 dna)").
    await env.stack.notify(user, { title: 'Invoice \u202Efdp.exe', body: 'due' });
    await waitFor(async () => (await inbox.page.locator('.toast-more').count()) === 1, {
      what: 'and 1 more',
    });
    const layout = await inbox.page.evaluate(() => {
      const root = document.querySelector('herald-inbox')?.shadowRoot as ShadowRoot;
      const feed = root.querySelector('[role="feed"]') as HTMLElement;
      // Each character of "(and 1 more)" (a text node per JSX part) with its x as laid out.
      const walker = document.createTreeWalker(
        root.querySelector('.toast-more') as Node,
        NodeFilter.SHOW_TEXT,
      );
      const letters: { char: string; x: number }[] = [];
      for (let node = walker.nextNode() as Text | null; node; node = walker.nextNode() as Text | null) {
        for (let index = 0; index < node.length; index++) {
          const range = document.createRange();
          range.setStart(node, index);
          range.setEnd(node, index + 1);
          letters.push({ char: node.data[index] as string, x: range.getBoundingClientRect().x });
        }
      }
      return { feedOverflow: feed.scrollWidth - feed.clientWidth, letters };
    });
    expect(layout.feedOverflow).toBe(0);
    const visual = layout.letters
      .filter(({ char }) => char.trim())
      .sort((a, b) => a.x - b.x)
      .map(({ char }) => char)
      .join('');
    expect(visual).toBe('(and1more)');

    // A payload as long as the gateway takes (16 KiB): the toast used to grow to 8,800 px, over half
    // the page, with its Dismiss button far above the window.
    const long = await env.stack.notify(user, {
      title: 'word '.repeat(1500),
      body: 'long body '.repeat(700),
    });
    const toast = inbox.page.locator(`.toast[data-id="${long}"]`);
    await toast.waitFor();
    const box = await toast.boundingBox();
    const dismiss = await toast.getByRole('button', { name: /^Dismiss/ }).boundingBox();
    expect(box && box.y >= 0 && box.height <= 700 / 2).toBe(true);
    expect(dismiss && dismiss.y >= 0).toBe(true);
    await context.close();
  });

  it('has no accessibility violations (axe-core, WCAG 2.x A and AA), before and after notifications arrive', async () => {
    const user = randomId('axe');
    const context = await env.browser.newContext();
    const inbox = await InboxPage.open(context, env.stack.url, user);
    const axe = () => axeViolations(inbox.page);
    expect(await axe()).toEqual([]);
    await env.stack.notify(user, { title: 'Read me', body: 'An unread notification' });
    await env.stack.notify(user, { title: 'And me' });
    await waitFor(async () => (await inbox.unread()) === 2 && (await inbox.toasts.count()) > 0, {
      what: 'two notifications and a toast',
    });
    expect(await axe()).toEqual([]);
    await context.close();
  });

  it('works with the keyboard alone: the bell, the feed (Page Down / Page Up), mark read, mark all read', async () => {
    const user = randomId('keys');
    const context = await env.browser.newContext();
    const inbox = await InboxPage.open(context, env.stack.url, user);
    await sendInTurn(inbox, user, ['first', 'second', 'third']);
    await waitFor(async () => (await inbox.unread()) === 3, { what: 'three unread' });
    const { page } = inbox;

    await page.keyboard.press('Tab');
    expect(await focused(page)).toBe(`BUTTON Notifications, 3 unread`);
    // The bell closes and opens the panel.
    await page.keyboard.press('Enter');
    await waitFor(async () => (await inbox.bell.getAttribute('aria-expanded')) === 'false', {
      what: 'closed',
    });
    expect(await inbox.feed.isVisible()).toBe(false);
    await page.keyboard.press('Enter');
    await waitFor(async () => (await inbox.bell.getAttribute('aria-expanded')) === 'true', { what: 'open' });

    await page.keyboard.press('Tab');
    expect(await focused(page)).toBe('BUTTON Mark all read');
    await page.keyboard.press('Tab');
    expect(await focused(page)).toMatch(/^ARTICLE Unread: third/);
    await page.keyboard.press('PageDown');
    expect(await focused(page)).toMatch(/^ARTICLE Unread: second/);
    await page.keyboard.press('PageDown');
    expect(await focused(page)).toMatch(/^ARTICLE Unread: first/);
    await page.keyboard.press('PageUp');
    expect(await focused(page)).toMatch(/^ARTICLE Unread: second/);

    // Into the article: its "Mark read" button, pressed with Enter.
    await page.keyboard.press('Tab');
    expect(await focused(page)).toBe('BUTTON Mark read: second');
    await page.keyboard.press('Enter');
    await waitFor(async () => (await inbox.unread()) === 2, { what: 'the badge at 2' });
    // The button is gone with its unread state: focus stays in the feed, on its article (not the page).
    expect(await focused(page)).toMatch(/^ARTICLE second/);

    // Back to "Mark all read" (Shift+Tab through what precedes), pressed with Space.
    for (let i = 0; i < 10 && (await focused(page)) !== 'BUTTON Mark all read'; i++) {
      await page.keyboard.press('Shift+Tab');
    }
    expect(await focused(page)).toBe('BUTTON Mark all read');
    await page.keyboard.press('Space');
    await waitFor(async () => (await inbox.unread()) === 0, { what: 'the badge at 0' });
    // Nothing left to mark: the button says so (aria-disabled), and keeps the focus.
    expect(await focused(page)).toBe('BUTTON Mark all read');
    expect(await page.locator('button', { hasText: 'Mark all read' }).getAttribute('aria-disabled')).toBe(
      'true',
    );
    expect(await inbox.badge()).toBe('');
    expect(await env.stack.unread(user)).toBe(0);
    await context.close();
  });
  it('mutes a topic from a tab that does not hold the socket: its notifications stop, others still come; unmuted, they come again', async () => {
    const user = randomId('mute');
    const context = await env.browser.newContext();
    const tabs = [
      await InboxPage.open(context, env.stack.url, user),
      await InboxPage.open(context, env.stack.url, user),
    ];
    await waitFor(() => tabs.some((tab) => tab.openSockets() === 1), { what: 'a leader' });
    const follower = tabs.find((tab) => tab.openSockets() === 0) as InboxPage;
    await sendInTurn(follower, user, ['plain']);
    await env.stack.notify(user, { title: 'Spring sale' }, { topic: 'promo' });
    await waitFor(async () => (await follower.titles()).includes('Spring sale'), { what: 'the promo' });

    // The SDK's mute goes through the leader tab's socket (tab requests).
    await follower.articles
      .filter({ hasText: 'Spring sale' })
      .getByRole('button', { name: /^Mute topic promo/ })
      .click();
    const muted = follower.page.getByRole('list', { name: 'Muted' });
    await waitFor(
      async () =>
        (await muted.count()) === 1 && ((await muted.textContent()) ?? '').includes('promo (topic)'),
      { what: 'promo in the muted list' },
    );
    expect(await axeViolations(follower.page)).toEqual([]);
    const silenced = await env.stack.notify(user, { title: 'Another sale' }, { topic: 'promo' });
    await waitFor(async () => (await env.stack.status(silenced)) === 'muted', { what: 'the sale muted' });
    // Focus is still on the Mute button, inside the feed: what comes now waits behind "1 new" rather
    // than moving the list under the reader's pointer.
    await env.stack.notify(user, { title: 'still here' });
    const waiting = follower.page.getByRole('button', { name: '1 new' });
    await waitFor(async () => (await waiting.count()) === 1, { what: '"1 new" in the follower' });
    expect(await follower.titles()).not.toContain('still here');
    await waiting.click();
    await waitFor(async () => (await follower.titles())[0] === 'still here', { what: 'still here on top' });
    for (const tab of tabs)
      await waitFor(async () => (await tab.titles()).includes('still here'), { what: 'still here' });
    for (const tab of tabs) expect(await tab.titles()).not.toContain('Another sale');
    expect(await env.stack.inboxIds(user)).not.toContain(silenced);

    await follower.page.getByRole('button', { name: 'Unmute topic promo' }).click();
    await waitFor(async () => (await muted.count()) === 0, { what: 'the muted list gone' });
    await env.stack.notify(user, { title: 'Last sale' }, { topic: 'promo' });
    for (const tab of tabs)
      await waitFor(async () => (await tab.titles()).includes('Last sale'), { what: 'the unmuted promo' });
    await context.close();
  });
  it('subscribes to a topic the token allows (?topics=) from the page: its topic sends arrive; unsubscribed, they stop', async () => {
    const user = randomId('topics');
    const context = await env.browser.newContext();
    const page = new InboxPage(await context.newPage());
    await page.page.goto(`${env.stack.url}/?user=${user}&topics=news,releases`);
    await page.waitForState('live');
    const news = page.page.getByRole('checkbox', { name: 'news' });
    await waitFor(() => news.isVisible(), { what: 'the news checkbox' });
    expect(await news.isChecked()).toBe(false);
    await news.click();
    await waitFor(() => news.isChecked(), { what: 'subscribed to news' });
    expect(await axeViolations(page.page)).toEqual([]);
    await env.stack.notifyTopic('news', { title: 'Herald 2.0 is out' });
    await waitFor(async () => (await page.titles()).includes('Herald 2.0 is out'), {
      what: 'the topic send',
    });
    await news.click();
    await waitFor(async () => !(await news.isChecked()), { what: 'unsubscribed' });
    await context.close();
  });
});
