import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { skewedClock } from '../src/clock.js';
import { type AppProcess, startApp } from '../src/processes.js';

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

/** libfaketime's files in /dev/shm (its semaphores and shared memory objects). */
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
