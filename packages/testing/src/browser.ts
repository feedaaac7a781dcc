import { existsSync } from 'node:fs';
import type { Browser, LaunchOptions } from 'playwright-core';

/** Debian's Chromium (`apt-get install chromium`, which `.ci/run` does when it is missing). */
export const CHROMIUM_PATH = '/usr/bin/chromium';

/**
 * Flags for a machine whose only network is loopback: without them Chromium keeps dialling Google's
 * services (component updates, sync, QUIC probes, background fetches) and floods the log with refused
 * connections. Playwright adds `--headless` and a fresh temporary `--user-data-dir` itself.
 */
export const CHROMIUM_ARGS: readonly string[] = Object.freeze([
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
]);

/**
 * Launches Debian's Chromium at {@link CHROMIUM_PATH} through playwright-core, which never downloads a
 * browser (it has no postinstall), headless with {@link CHROMIUM_ARGS} and a fresh profile (Playwright's
 * `launch` makes a new temporary `--user-data-dir` each time and removes it on `close()`). One browser
 * per test file; a context per simulated browser profile (pages of one context share Web Locks and
 * `BroadcastChannel`, like tabs; two contexts are two people).
 *
 * @example
 * ```ts
 * const browser = await launchChromium();
 * const context = await browser.newContext();
 * const page = await context.newPage();
 * await browser.close();
 * ```
 */
export async function launchChromium(options: LaunchOptions = {}): Promise<Browser> {
  const executablePath = options.executablePath ?? CHROMIUM_PATH;
  if (!existsSync(executablePath)) {
    throw new Error(
      `No Chromium at ${executablePath}: install Debian's (apt-get install chromium; .ci/run does) — Herald's tests never download a browser.`,
    );
  }
  // Imported here, not at the top: every test file imports @herald/testing, and playwright-core takes
  // about 0.8 s to load, which only the browser tests should pay.
  const { chromium } = await import('playwright-core');
  return chromium.launch({
    headless: true,
    timeout: 30_000,
    ...options,
    executablePath,
    args: [...CHROMIUM_ARGS, ...(options.args ?? [])],
  });
}
