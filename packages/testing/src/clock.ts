import { existsSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Where Debian's `faketime` package (and a build from source) put libfaketime: multiarch first
 * (`/usr/lib/x86_64-linux-gnu/faketime`), then the plain prefixes.
 */
function libfaketimeCandidates(): string[] {
  const multiarch = (() => {
    try {
      return readdirSync('/usr/lib').filter((dir) => dir.endsWith('-linux-gnu'));
    } catch {
      return [];
    }
  })();
  return [
    ...multiarch.map((dir) => join('/usr/lib', dir, 'faketime')),
    '/usr/lib/faketime',
    '/usr/local/lib/faketime',
  ].map((dir) => join(dir, 'libfaketime.so.1'));
}

/** The path of libfaketime, or undefined when it is not installed. */
function libfaketimePath(): string | undefined {
  return libfaketimeCandidates().find((path) => existsSync(path));
}

/** libfaketime's files in /dev/shm: `sem.faketime_sem_<pid>` and `faketime_shm_<pid>`. */
const FAKETIME_FILE = /^(?:sem\.faketime_sem_|faketime_shm_)(\d+)$/;

/**
 * Removes the files in /dev/shm that libfaketime made for processes that no longer run (what its README
 * asks: "delete /dev/shm/faketime_shm_* and /dev/shm/sem.faketime_sem_* … or properly automated").
 * Those of running processes are kept.
 */
function sweepFaketimeFiles(): void {
  let names: string[];
  try {
    names = readdirSync('/dev/shm');
  } catch {
    return;
  }
  for (const name of names) {
    const pid = FAKETIME_FILE.exec(name)?.[1];
    if (pid !== undefined && !existsSync(`/proc/${pid}`)) rmSync(join('/dev/shm', name), { force: true });
  }
}

/**
 * The environment that runs a process with its wall clock off by `skew` (libfaketime's relative
 * offset: '-45s', '+30s', '+2m'), as on a machine without NTP; Redis keeps the true time.
 *
 * libfaketime is preloaded into the process itself rather than run under the `faketime` wrapper, which
 * forks (a signal to it alone left the app running, and startApp needed a process group for it).
 * Either way libfaketime makes a semaphore and a shared memory object named after the process's pid,
 * removed only when the process ends normally: a process stopped by a signal left
 * `/dev/shm/sem.faketime_sem_<pid>` behind, and a later one given the same pid (pid_max is 32768 on the
 * CI machine) refused to start: `faketime: sem_open: File exists`. So every call first removes those
 * of processes that no longer run.
 *
 * @example
 * ```ts
 * await startApp({ name: 'worker-behind', entry, env: { ...env, ...skewedClock('-45s') } });
 * ```
 */
export function skewedClock(skew: string): Record<string, string> {
  if (!/^[+-]\d+(\.\d+)?[smhdy]?$/.test(skew)) {
    throw new Error(`skewedClock: '${skew}' is not a relative offset such as '-45s' or '+30s'`);
  }
  const library = libfaketimePath();
  if (library === undefined) {
    throw new Error(
      `skewedClock needs libfaketime (looked in ${libfaketimeCandidates().join(', ')}): apt-get install -y faketime`,
    );
  }
  sweepFaketimeFiles();
  const preload = process.env.LD_PRELOAD;
  return {
    LD_PRELOAD: preload ? `${library} ${preload}` : library,
    FAKETIME: skew,
    // Only the wall clock: timers and performance.now() keep the true pace and origin.
    FAKETIME_DONT_FAKE_MONOTONIC: '1',
  };
}
