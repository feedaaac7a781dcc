import { waitFor } from '@herald/testing';
import type { BrowserContext, Page } from 'playwright-core';

/** The operator dashboard of one tab, read the way an operator reads it. */
export class DashboardPage {
  readonly page: Page;

  constructor(page: Page) {
    this.page = page;
  }

  /** Opens `/dashboard` in a new tab of `context` (it asks for the admin key first). */
  static async open(context: BrowserContext, origin: string): Promise<DashboardPage> {
    const dashboard = new DashboardPage(await context.newPage());
    await dashboard.page.goto(`${origin}/dashboard`);
    return dashboard;
  }

  /** Types `key` into the admin key form and submits it. */
  async signIn(key: string): Promise<void> {
    await this.page.getByLabel('Admin key', { exact: true }).fill(key);
    await this.page.getByRole('button', { name: 'Open the dashboard' }).click();
  }

  /** The form's problem (`role=alert`), once it shows one. */
  async problem(): Promise<string> {
    const alert = this.page.getByRole('alert');
    await alert.waitFor();
    return (await alert.textContent()) ?? '';
  }

  async state(): Promise<string | null> {
    return this.page
      .locator('.state')
      .getAttribute('data-state', { timeout: 1000 })
      .catch(() => null);
  }

  async waitForLive(): Promise<void> {
    await waitFor(async () => (await this.state()) === 'live', {
      timeoutMs: 15_000,
      what: 'the dashboard live',
    });
  }

  /** When the snapshot on screen was read (ISO), undefined before the first. */
  async snapshotAt(): Promise<string | undefined> {
    return (
      (await this.page
        .locator('.grid')
        .getAttribute('data-at', { timeout: 1000 })
        .catch(() => null)) ?? undefined
    );
  }

  /** Waits for a snapshot read after `after` (ms since epoch) to be on screen. */
  async waitForSnapshotAfter(after: number): Promise<void> {
    await waitFor(async () => Date.parse((await this.snapshotAt()) ?? '') > after, {
      timeoutMs: 10_000,
      what: 'a newer snapshot on the dashboard',
    });
  }

  /** The hot user's tokens left as the table shows them (`7 / 10` → 7), undefined when not listed. */
  async tokensOf(label: string): Promise<number | undefined> {
    const cell = this.page.locator(`tr[data-user="${label}"] td.tokens`);
    if ((await cell.count()) === 0) return undefined;
    const match = /^(\d+) \/ \d+$/.exec(((await cell.textContent()) ?? '').trim());
    return match ? Number(match[1]) : undefined;
  }

  /** The value of a row of one of the label → value tables (e.g. `p50`, `rt-1…`), by its label. */
  async pair(section: string | RegExp, label: string): Promise<string | undefined> {
    const row = this.page
      .locator('section.card', { has: this.page.getByRole('heading', { name: section }) })
      .locator('tr', { has: this.page.locator('th', { hasText: label }) });
    if ((await row.count()) === 0) return undefined;
    return ((await row.first().locator('td').textContent()) ?? '').trim();
  }

  /** The labels in the token chart's legend (uPlot draws its legend as a table). */
  async chartLegend(): Promise<string[]> {
    return this.page
      .locator('[aria-label^="Token levels"] .u-legend .u-series .u-label')
      .evaluateAll((labels) => labels.map((label) => label.textContent ?? ''));
  }
}
