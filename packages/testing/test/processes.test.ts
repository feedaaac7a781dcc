import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type AppProcess, startApp } from '../src/processes.js';
import { waitFor } from '../src/wait.js';

const hasFaketime = spawnSync('faketime', ['--version'], { stdio: 'ignore' }).status === 0;

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

/**
 * Starts, under `faketime` (which forks: the app is its child, not the process `startApp` spawns), an
 * app that says its pid, is ready, and runs until it is stopped.
 */
async function startWrapped(cleanup: (() => void)[]): Promise<{ app: AppProcess; appPid: number }> {
  if (!hasFaketime) throw new Error('This test needs `faketime`: apt-get install -y faketime');
  const dir = mkdtempSync(join(tmpdir(), 'herald-processes-'));
  const entry = join(dir, 'app.mjs');
  writeFileSync(
    entry,
    "console.log(JSON.stringify({ msg: 'pid', pid: process.pid }));\nconsole.log(JSON.stringify({ msg: 'ready' }));\nsetInterval(() => {}, 1000);\n",
  );
  const started = { appPid: 0 };
  cleanup.push(() => {
    if (started.appPid > 0 && running(started.appPid)) process.kill(started.appPid, 'SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });
  const app = await startApp({
    name: 'wrapped',
    entry,
    env: {},
    command: 'faketime',
    args: ['-f', '+30s', process.execPath, entry],
  });
  const line = app.lines.find((l) => l.includes('"pid"'));
  started.appPid = (JSON.parse(line ?? '{}') as { pid?: number }).pid ?? 0;
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
