import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

/** An app process started by a test. */
export interface AppProcess {
  name: string;
  process: ChildProcess;
  /** Port from the app's `listening` log line (undefined for apps that do not listen). */
  port: number | undefined;
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** Every stdout/stderr line so far, for failure messages. */
  lines: string[];
  /** Sends `signal` (default SIGTERM) and waits for the exit; SIGKILL after `graceMs`. */
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<number | null>;
}

/**
 * Starts `node <entry>` with `env` on top of this process's environment and waits for its JSON log
 * line whose `msg` is `listening` (with `port`) or `ready`. With `into`, the started process is added
 * to that list (the test's processes, stopped after it). With `port`, the app listens there and is also
 * ready once it answers `GET /healthz` (any status): for apps logging below `info`
 * (`HERALD_LOG_LEVEL: 'warn'`), which never log `listening`.
 */
export async function startApp(options: {
  name: string;
  entry: string;
  env: Record<string, string>;
  args?: string[];
  /**
   * The program to run instead of this process's Node (another Node binary), `args` then its whole
   * argument list. It must be the app itself: `stop` signals that process only, not children of a
   * wrapper that forks (clocks are skewed with `skewedClock`, not the `faketime` wrapper).
   */
  command?: string;
  timeoutMs?: number;
  into?: AppProcess[];
  port?: number;
}): Promise<AppProcess> {
  const command = options.command ?? process.execPath;
  const args = options.command ? (options.args ?? []) : [options.entry, ...(options.args ?? [])];
  const child = spawn(command, args, {
    env: {
      ...process.env,
      PORT: String(options.port ?? 0),
      HERALD_LOG_LEVEL: 'info',
      ...options.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const signal = (name: NodeJS.Signals) => {
    try {
      child.kill(name);
    } catch {
      // already gone
    }
  };
  const lines: string[] = [];
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));

  const ready = new Promise<number | undefined>((resolve, reject) => {
    const timer = setTimeout(() => {
      // Not left running: nobody holds a handle to stop it.
      signal('SIGKILL');
      reject(new Error(`${options.name} did not start in time. Output:\n${lines.join('\n')}`));
    }, options.timeoutMs ?? 20_000);
    const onLine = (line: string) => {
      lines.push(line);
      if (!line.startsWith('{')) return;
      try {
        const entry = JSON.parse(line) as { msg?: string; port?: number };
        if (entry.msg === 'listening' || entry.msg === 'ready') {
          clearTimeout(timer);
          resolve(entry.port);
        }
      } catch {
        // not a JSON log line
      }
    };
    if (options.port !== undefined) {
      void answersHttp(options.port, child).then((up) => {
        if (!up) return;
        clearTimeout(timer);
        resolve(options.port);
      });
    }
    if (child.stdout) createInterface({ input: child.stdout }).on('line', onLine);
    if (child.stderr) createInterface({ input: child.stderr }).on('line', onLine);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(
        new Error(`${options.name} exited with ${code} before it was ready. Output:\n${lines.join('\n')}`),
      );
    });
  });

  const port = await ready;
  const app: AppProcess = {
    name: options.name,
    process: child,
    port,
    url: `http://127.0.0.1:${port ?? 0}`,
    lines,
    async stop(name = 'SIGTERM', graceMs = 10_000) {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      signal(name);
      const timer = setTimeout(() => signal('SIGKILL'), graceMs);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
  options.into?.push(app);
  return app;
}

/** Polls `GET /healthz` on `port` until it answers (true) or `child` exits (false). */
async function answersHttp(port: number, child: ChildProcess): Promise<boolean> {
  while (child.exitCode === null && child.signalCode === null) {
    try {
      await (await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(1000) })).text();
      return true;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  return false;
}
