import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { skewedClock } from '../src/clock.js';
import { type AppProcess, startApp } from '../src/processes.js';
import { waitFor } from '../src/wait.js';

/** Whether a process with `pid` still runs (a zombie counts as gone: it has exited). */
function running(pid: number): boolean {
  try {
    // /proc/<pid>/stat: "<pid> (<comm>) <state> …"
    const state = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0];
    return state !== undefined && state !== 'Z';
  } catch {
    return false;
  }
}

/** Writes an app that says its pid and its wall clock, is ready, and runs until it is stopped. */
function writeApp(cleanup: (() => void)[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'herald-processes-'));
  const entry = join(dir, 'app.mjs');
  writeFileSync(
    entry,
    "console.log(JSON.stringify({ msg: 'pid', pid: process.pid, now: Date.now() }));\nconsole.log(JSON.stringify({ msg: 'ready' }));\nsetInterval(() => {}, 1000);\n",
  );
  cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
  return entry;
}

/** The `pid` line of an app written by {@link writeApp}. */
function said(app: AppProcess): { pid: number; now: number } {
  const line = app.lines.find((l) => l.includes('"pid"'));
  return JSON.parse(line ?? '{"pid":0,"now":0}') as { pid: number; now: number };
}

/**
 * Starts, under a wrapper command that forks (`sh` running node as its child, not exec'ing it: the app
 * is not the process `startApp` spawns), an app that says its pid, is ready, and runs until stopped.
 */
async function startWrapped(cleanup: (() => void)[]): Promise<{ app: AppProcess; appPid: number }> {
  const entry = writeApp(cleanup);
  const started = { appPid: 0 };
  cleanup.push(() => {
    if (started.appPid > 0 && running(started.appPid)) process.kill(started.appPid, 'SIGKILL');
  });
  const app = await startApp({
    name: 'wrapped',
    entry,
    env: {},
    command: 'sh',
    // `; exit $?` after it: sh cannot exec node in its own place.
    args: ['-c', '"$@"; exit $?', 'sh', process.execPath, entry],
  });
  started.appPid = said(app).pid;
  return { app, appPid: started.appPid };
}

describe('startApp under a wrapper command', () => {
  const cleanup: (() => void)[] = [];
  afterEach(() => {
    for (const clean of cleanup.splice(0)) clean();
  });

  it('stop() ends the app itself, not only the wrapper (a forked app was left running)', async () => {
    const { app, appPid } = await startWrapped(cleanup);
    expect(appPid).toBeGreaterThan(0);
    expect(appPid).not.toBe(app.process.pid);
    expect(running(appPid)).toBe(true);
    await app.stop('SIGTERM', 2000);
    await waitFor(() => !running(appPid), { timeoutMs: 5_000, what: 'the wrapped app to be gone' });
  }, 20_000);

  it('stop(SIGKILL) (a kill -9) ends the app itself too', async () => {
    const { app, appPid } = await startWrapped(cleanup);
    expect(running(appPid)).toBe(true);
    await app.stop('SIGKILL', 0);
    await waitFor(() => !running(appPid), { timeoutMs: 5_000, what: 'the wrapped app to be gone' });
  }, 20_000);
});

/** libfaketime's files in /dev/shm (the `faketime` wrapper's semaphore and shared memory). */
function faketimeFiles(): string[] {
  return readdirSync('/dev/shm').filter((name) => name.includes('faketime'));
}

describe('skewedClock', () => {
  const cleanup: (() => void)[] = [];
  afterEach(() => {
    for (const clean of cleanup.splice(0)) clean();
  });

  it('runs the app itself with its wall clock off', async () => {
    const entry = writeApp(cleanup);
    const behind = await startApp({ name: 'behind', entry, env: skewedClock('-45s') });
    const ahead = await startApp({ name: 'ahead', entry, env: skewedClock('+30s') });
    const now = Date.now();
    // The app is the process spawned: no wrapper in between.
    expect(said(behind).pid).toBe(behind.process.pid);
    expect(said(behind).now - now).toBeGreaterThan(-50_000);
    expect(said(behind).now - now).toBeLessThan(-40_000);
    expect(said(ahead).now - now).toBeGreaterThan(25_000);
    expect(said(ahead).now - now).toBeLessThan(35_000);
    await behind.stop('SIGKILL', 0);
    await ahead.stop('SIGTERM', 2000);
  }, 20_000);

  it('removes what libfaketime left in /dev/shm for processes gone (a later one with that pid could not start), never a running one’s', async () => {
    // libfaketime names a semaphore and a shared memory object after the pid and removes them only at a
    // normal exit: a kill -9 leaves them, and a later process given that pid refused to start
    // (`faketime: sem_open: File exists`, a CI run failed on it).
    const entry = writeApp(cleanup);
    const killed = await startApp({ name: 'killed', entry, env: skewedClock('-45s') });
    const killedPid = killed.process.pid ?? 0;
    await killed.stop('SIGKILL', 0);
    const left = faketimeFiles().filter((name) => name.endsWith(`_${killedPid}`));
    expect(left.length).toBeGreaterThan(0);
    const running = await startApp({ name: 'running', entry, env: skewedClock('+30s') });
    const runningFiles = faketimeFiles().filter((name) => name.endsWith(`_${running.process.pid}`));
    expect(runningFiles.length).toBeGreaterThan(0);
    // A pid that is gone for sure: a process that has ended.
    const gonePid = spawnSync(process.execPath, [
      '-e',
      'process.stdout.write(String(process.pid))',
    ]).stdout.toString();
    const stale = join('/dev/shm', `sem.faketime_sem_${gonePid}`);
    writeFileSync(stale, '');
    cleanup.push(() => rmSync(stale, { force: true }));

    skewedClock('-1s');
    expect(faketimeFiles().filter((name) => name.endsWith(`_${killedPid}`))).toEqual([]);
    expect(existsSync(stale)).toBe(false);
    for (const name of runningFiles) expect(existsSync(join('/dev/shm', name))).toBe(true);
    await running.stop('SIGTERM', 2000);
  }, 20_000);

  it('refuses what is not a relative offset, saying what it takes', () => {
    expect(() => skewedClock('2026-01-01 00:00:00')).toThrow(/relative offset/);
  });
});
