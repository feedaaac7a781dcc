import { mkdirSync } from 'node:fs';
import { waitFor } from '@herald/testing';
import type { BrowserContext, Page, WebSocket } from 'playwright-core';

/** Where the browser tests save their screenshots (git-ignored; docs/inbox.png is one of them). */
export const SCREENSHOTS = new URL('../../screenshots/', import.meta.url);

export function screenshotPath(name: string): string {
  mkdirSync(SCREENSHOTS, { recursive: true });
  return new URL(`${name}.png`, SCREENSHOTS).pathname;
}

/**
 * The inbox page of one tab, read the way a person reads it: through roles and names (Playwright's
 * locators pierce `<herald-inbox>`'s open shadow root).
 */
export class InboxPage {
  readonly page: Page;
  /** Every WebSocket this tab opened, with whether it is still open. */
  readonly sockets: { socket: WebSocket; open: boolean }[] = [];

  constructor(page: Page) {
    this.page = page;
    page.on('websocket', (socket) => {
      const entry = { socket, open: true };
      this.sockets.push(entry);
      socket.on('close', () => {
        entry.open = false;
      });
    });
  }

  /** Opens `/?user=<userId>` in a new tab of `context` and waits until it is live. */
  static async open(context: BrowserContext, origin: string, userId: string): Promise<InboxPage> {
    const inbox = new InboxPage(await context.newPage());
    await inbox.page.goto(`${origin}/?user=${encodeURIComponent(userId)}`);
    await inbox.waitForState('live');
    return inbox;
  }

  get bell() {
    return this.page.getByRole('button', { name: /^Notifications/ });
  }

  get feed() {
    return this.page.getByRole('feed', { name: 'Notifications' });
  }

  get articles() {
    return this.feed.getByRole('article');
  }

  get toasts() {
    return this.page.locator('.toast');
  }

  get indicator() {
    return this.page.locator('.connection');
  }

  /** The unread count the bell announces (`Notifications, 3 unread`), undefined before the server said. */
  async unread(): Promise<number | undefined> {
    const label = (await this.bell.getAttribute('aria-label')) ?? '';
    const match = /, (\d+) unread$/.exec(label);
    return match ? Number(match[1]) : undefined;
  }

  /** The badge's text ('' when hidden: no unread). */
  async badge(): Promise<string> {
    const badge = this.page.locator('.badge');
    return (await badge.isVisible()) ? ((await badge.textContent()) ?? '') : '';
  }

  /** The ids of the articles shown, top (newest) first. */
  async shownIds(): Promise<string[]> {
    return this.articles.evaluateAll((articles) =>
      articles.map((article) => (article as HTMLElement).dataset.id ?? ''),
    );
  }

  /** The titles of the articles shown, top (newest) first. */
  async titles(): Promise<string[]> {
    return this.page
      .locator('article .entry-title')
      .evaluateAll((titles) => titles.map((title) => (title.textContent ?? '').replace(/^Unread: /, '')));
  }

  async state(): Promise<string | null> {
    return this.indicator.getAttribute('data-state');
  }

  async waitForState(state: string, timeoutMs = 30_000): Promise<void> {
    await waitFor(async () => (await this.state()) === state, {
      timeoutMs,
      what: `the indicator to say ${state}`,
    });
  }

  /** WebSockets of this tab still open. */
  openSockets(): number {
    return this.sockets.filter((entry) => entry.open).length;
  }
}
