import { randomId, waitFor } from '@herald/testing';
import { describe, expect, it } from 'vitest';
import { InboxPage } from '../support/inbox-page.js';
import { API_KEY, stackAndBrowser } from '../support/stack.js';

// A user with more notifications than the client keeps (its newest 200): the badge counts every unread
// one, so the inbox must reach the older ones too.
const env = stackAndBrowser({ HERALD_RATE_LIMIT_BURST: '1000', HERALD_SENDER_RATE_LIMIT_BURST: '1000' });

describe('older notifications than the client keeps', () => {
  it('"Show older" pages back to the first, each once, in order; marked read there, the badge follows', async () => {
    const user = randomId('older');
    // 230 in three batches, titled by their order.
    for (let from = 0; from < 230; from += 100) {
      const notifications = Array.from({ length: Math.min(100, 230 - from) }, (_, n) => ({
        userId: user,
        payload: { title: `n${from + n}` },
      }));
      const response = await fetch(`${env.stack.url}/api/notify/batch`, {
        method: 'POST',
        headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ notifications }),
      });
      expect(response.status).toBe(202);
      // The next batch after this one is stored: the inbox's order is the send order here.
      await waitFor(async () => (await env.stack.inboxIds(user)).length >= from + notifications.length, {
        what: `${from + notifications.length} stored`,
      });
    }
    const context = await env.browser.newContext();
    const inbox = await InboxPage.open(context, env.stack.url, user);
    await waitFor(async () => (await inbox.unread()) === 230, { what: 'the badge at 230' });
    await waitFor(async () => (await inbox.titles()).length === 200, { what: 'the newest 200' });
    const older = inbox.page.getByRole('button', { name: 'Show older' });
    while ((await older.count()) > 0) {
      const before = (await inbox.titles()).length;
      await older.click();
      await waitFor(async () => (await inbox.titles()).length > before || (await older.count()) === 0, {
        what: 'an older page',
      });
    }
    const titles = await inbox.titles();
    // Newest first, every one once.
    expect(titles).toEqual(Array.from({ length: 230 }, (_, n) => `n${229 - n}`));
    await inbox.page.getByRole('button', { name: /^Mark read: n0\b/ }).click();
    await waitFor(async () => (await inbox.unread()) === 229, { what: 'the badge at 229' });
    expect(await env.stack.unread(user)).toBe(229);

    // Five more arrive live: the client keeps its newest 200, and the five it lets go stay in the feed
    // (before: n30–n34 were in neither list, for good).
    for (let n = 230; n < 235; n++) await env.stack.notify(user, { title: `n${n}` });
    await waitFor(async () => (await inbox.unread()) === 234, { what: 'the badge at 234' });
    // The reader is in the list (the focus on a button there): the five wait behind "5 new".
    const fresh = inbox.page.getByRole('button', { name: /^\d+ new$/ });
    await waitFor(async () => (await fresh.count()) === 1 || (await inbox.titles()).length === 235, {
      what: 'the five, shown or waiting',
    });
    if ((await fresh.count()) === 1) await fresh.click();
    await waitFor(async () => (await inbox.titles()).length === 235, { what: 'every one in the feed' });
    expect(await inbox.titles()).toEqual(Array.from({ length: 235 }, (_, n) => `n${234 - n}`));
    // Mark all read: the older ones too (before: they kept saying Unread).
    await inbox.page.getByRole('button', { name: 'Mark all read' }).click();
    await waitFor(async () => (await inbox.unread()) === 0, { what: 'the badge at 0' });
    await waitFor(async () => (await inbox.articles.filter({ hasText: 'Unread:' }).count()) === 0, {
      what: 'no article saying Unread',
    });
    await context.close();
  }, 120_000);

  it('an inbox the client holds whole offers no "Show older"', async () => {
    const user = randomId('small');
    for (let n = 0; n < 3; n++) await env.stack.notify(user, { title: `s${n}` });
    const context = await env.browser.newContext();
    const inbox = await InboxPage.open(context, env.stack.url, user);
    await waitFor(async () => (await inbox.titles()).length === 3, { what: 'the three' });
    expect(await inbox.page.getByRole('button', { name: 'Show older' }).count()).toBe(0);
    await context.close();
  });
});
