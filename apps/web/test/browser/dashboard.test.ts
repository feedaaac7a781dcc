import { randomUUID } from 'node:crypto';
import { NOTIFY_JOB_NAME, type NotificationJob, notificationJobOptions } from '@herald/protocol';
import { randomId, redisUrl, waitFor } from '@herald/testing';
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { axeViolations } from '../support/axe.js';
import { DashboardPage } from '../support/dashboard-page.js';
import { InboxPage, screenshotPath } from '../support/inbox-page.js';
import { API_KEY, stackAndBrowser } from '../support/stack.js';

// 32+ bytes, and none of the API keys.
const ADMIN_KEY = 'web-tests-admin-0123456789abcdef0123456789';

describe('the operator dashboard, in Chromium, against the stack as processes', () => {
  const env = stackAndBrowser({
    HERALD_ADMIN_KEY: ADMIN_KEY,
    // A burst of 10 refilled at 1 token a second: a flood drains it in a few seconds and it
    // visibly refills, step by step, in the next ten.
    HERALD_RATE_LIMIT_BURST: '10',
    HERALD_RATE_LIMIT_PER_SECOND: '1',
  });
  let queue: Queue<NotificationJob>;
  beforeAll(() => {
    queue = new Queue(env.stack.env.HERALD_QUEUE_NAME ?? '', {
      prefix: '{herald}',
      connection: { url: redisUrl(), maxRetriesPerRequest: null },
    });
  });
  afterAll(async () => {
    await queue?.close();
  });

  /** POST /notify through the web server; answers the status (202, or 429 once the bucket is empty). */
  async function send(userId: string): Promise<number> {
    const response = await fetch(`${env.stack.url}/api/notify`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ userId, payload: { title: 'flood' } }),
    });
    await response.arrayBuffer();
    return response.status;
  }

  it('refuses a tenant API key, then shows a flooded user’s token level falling and refilling', async () => {
    const flooded = randomId('flooded');
    const other = randomId('bob');
    // The flooded user has the inbox open: one connection, and acks for the latency figures.
    const inboxContext = await env.browser.newContext();
    const inbox = await InboxPage.open(inboxContext, env.stack.url, flooded);

    const context = await env.browser.newContext({ viewport: { width: 1280, height: 1000 } });
    const dashboard = await DashboardPage.open(context, env.stack.url);
    expect(await axeViolations(dashboard.page)).toEqual([]);
    // Keys no HTTP header can carry (not ISO-8859-1), or too long for any: refused as well, not retried.
    for (const key of ['ключ', 'k'.repeat(20_000)]) {
      await dashboard.signIn(key);
      expect(await dashboard.problem(), key.slice(0, 8)).toContain('Not the admin key');
    }
    await dashboard.signIn(API_KEY);
    expect(await dashboard.problem()).toContain('Not the admin key');
    await dashboard.signIn(ADMIN_KEY);
    await dashboard.waitForLive();

    // A failed notification (an empty userId can never be stored: the worker fails it at once).
    const failedId = randomUUID();
    const job: NotificationJob = {
      id: failedId,
      userId: '',
      payload: {},
      createdAt: new Date().toISOString(),
    };
    await queue.add(NOTIFY_JOB_NAME, job, notificationJobOptions(job));
    for (let i = 0; i < 3; i++) expect(await send(other)).toBe(202);

    // Flood: 6 notifications per snapshot against a refill of 1 a second, until the bucket is drained.
    // The level is read (peeked) at most ~1.25 s after a round's sends: drained reads as 2 or less.
    const falling: number[] = [];
    let sendNow = true;
    for (let round = 0; round < 15; round++) {
      if (sendNow) for (let i = 0; i < 6; i++) await send(flooded);
      await dashboard.waitForSnapshotAfter(Date.now());
      const level = await dashboard.tokensOf(flooded);
      // Not listed yet (its second not flushed when the snapshot was read): read the next one first.
      sendNow = level !== undefined;
      if (level === undefined) continue;
      falling.push(level);
      if (level <= 2) break;
    }
    // Then nothing: it refills at 1 a second.
    const refilling: number[] = [];
    await waitFor(
      async () => {
        await dashboard.waitForSnapshotAfter(Date.now());
        const level = await dashboard.tokensOf(flooded);
        if (level !== undefined && level !== refilling.at(-1)) refilling.push(level);
        return level !== undefined && level >= 8;
      },
      { timeoutMs: 20_000, what: 'the bucket to refill' },
    );
    console.log(
      `token levels on the dashboard: falling ${falling.join(' → ')}, refilling ${refilling.join(' → ')}`,
    );
    expect(Math.min(...falling)).toBeLessThanOrEqual(2);
    expect(
      falling.filter((level, i) => i > 0 && level < (falling[i - 1] ?? 0)).length,
    ).toBeGreaterThanOrEqual(1);
    expect(Math.max(...falling)).toBeGreaterThanOrEqual(3);
    expect(
      refilling.filter((level, i) => i > 0 && level > (refilling[i - 1] ?? 0)).length,
    ).toBeGreaterThanOrEqual(1);
    expect(refilling.at(-1)).toBeGreaterThanOrEqual(8);
    expect(await dashboard.chartLegend()).toEqual(expect.arrayContaining([flooded, other]));

    // The rest of the page, from the same stream.
    await waitFor(async () => (await dashboard.pair(/^Connections/, 'rt-1')) === '1', {
      what: 'one connection on rt-1',
    });
    await waitFor(async () => Number(await dashboard.pair(/^Delivery latency/, 'acked notifications')) >= 1, {
      what: 'latency samples from the inbox tab’s acks',
    });
    expect(await dashboard.pair(/^Delivery latency/, 'p50')).toMatch(/^[\d,.]+ ms$/);
    expect(
      Number(await dashboard.pair(/^Connections and resumes/, 'fresh (live from now)')),
    ).toBeGreaterThanOrEqual(1);
    // Jobs, not notifications: the sends above rode in envelopes, each one job for many.
    await waitFor(async () => Number(await dashboard.pair(/^Queue/, 'completed')) >= 1, {
      what: 'completed jobs on the dashboard',
    });

    // The failed notification, and its Retry button: the worker takes it again (and fails it again).
    const row = dashboard.page.locator(`tr[data-job="${failedId}"]`);
    await row.waitFor({ timeout: 10_000 });
    await dashboard.page.screenshot({ path: screenshotPath('dashboard'), fullPage: true });
    expect(await axeViolations(dashboard.page)).toEqual([]);
    const firstFailure = (await queue.getJob(failedId))?.finishedOn ?? 0;
    await row.getByRole('button', { name: `Retry ${failedId}` }).click();
    await waitFor(async () => (await row.getByRole('status').textContent()) === 'retried', {
      what: 'the row to say retried',
    });
    await waitFor(async () => ((await queue.getJob(failedId))?.finishedOn ?? 0) > firstFailure, {
      what: 'the retried notification to be processed again',
    });

    await inboxContext.close();
    await context.close();
    expect(await inbox.page.isClosed()).toBe(true);
  });
});
