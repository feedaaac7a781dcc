import type { Server } from 'node:http';
import closeWithGrace from 'close-with-grace';
import { ConfigError } from './env.js';
import { listenFailure } from './listen-errors.js';

/** Most time a graceful shutdown may take before the process exits anyway. */
export const SHUTDOWN_GRACE_MS = 10_000;

/** What {@link serveHttp} needs of an HTTP app: Fastify's instance has it. */
export interface HttpApp {
  server: Server;
  log: {
    info(data: Record<string, unknown>, message: string): void;
    warn(message: string): void;
    error(data: Record<string, unknown>, message: string): void;
  };
  listen(options: { port: number; host: string }): Promise<unknown>;
  close(): Promise<unknown>;
}

/**
 * An app's configuration, or the process's end: a {@link ConfigError} (or anything else thrown) is
 * written to stderr as it is, and the process exits 1 before anything starts.
 *
 * @example
 * ```ts
 * const config = configOrExit(() => loadConfig());
 * ```
 */
export function configOrExit<T>(load: () => T): T {
  try {
    return load();
  } catch (error) {
    process.stderr.write(`${error instanceof ConfigError ? error.message : String(error)}\n`);
    process.exit(1);
  }
}

/** What {@link onShutdown} logs through: pino's logger has it. */
export interface ShutdownLog {
  info(data: Record<string, unknown>, message: string): void;
  error(data: Record<string, unknown>, message: string): void;
}

/**
 * The signals Node handles itself by the flags `flags` (`process.execArgv` and `NODE_OPTIONS`):
 * `--heapsnapshot-signal=<signal>` (a heap snapshot) and `--report-on-signal` (a diagnostic report,
 * on `--report-signal`, SIGUSR2 by default). An operator sends them to look inside a live process.
 *
 * @example
 * ```ts
 * diagnosticSignals(['--heapsnapshot-signal=SIGUSR2']); // ['SIGUSR2']
 * ```
 */
export function diagnosticSignals(flags: readonly string[]): NodeJS.Signals[] {
  const value = (name: string): string | undefined => {
    const at = flags.findLastIndex((flag) => flag === name || flag.startsWith(`${name}=`));
    const flag = flags[at];
    if (flag === undefined) return undefined;
    return flag === name ? flags[at + 1] : flag.slice(name.length + 1);
  };
  const signals = new Set<string>();
  const snapshot = value('--heapsnapshot-signal');
  if (snapshot) signals.add(snapshot);
  if (flags.includes('--report-on-signal')) signals.add(value('--report-signal') ?? 'SIGUSR2');
  return [...signals].filter((signal): signal is NodeJS.Signals => /^SIG[A-Z0-9]+$/.test(signal));
}

/**
 * On SIGTERM/SIGINT (or an uncaught error, logged as fatal) runs `close` once, then exits; a close that
 * takes longer than {@link SHUTDOWN_GRACE_MS} is cut short. A signal Node handles itself (see
 * {@link diagnosticSignals}) does not stop the process.
 *
 * @example
 * ```ts
 * onShutdown(log, () => server.close());
 * ```
 */
export function onShutdown(log: ShutdownLog, close: () => Promise<unknown>): void {
  // close-with-grace also stops on SIGUSR2 (and SIGHUP, SIGQUIT…), unless a signal is skipped: one
  // that Node was told to handle itself takes its heap snapshot or report and the process goes on.
  const skip = diagnosticSignals([...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)]);
  closeWithGrace(
    { delay: SHUTDOWN_GRACE_MS, skip: skip as closeWithGrace.AllEvents[] },
    async ({ signal, err }) => {
      if (err) log.error({ err }, 'fatal error; shutting down');
      else log.info({ signal }, 'shutting down');
      await close();
    },
  );
}

/**
 * Logs the start-up `warnings`, listens on `port`/`host`, logs `listening` with the port actually taken
 * (what the tests' `startApp` waits for) and, on SIGTERM/SIGINT, stops accepting, lets in-flight
 * requests finish and closes the app within {@link SHUTDOWN_GRACE_MS}. `close()` closes idle keep-alive
 * connections only once; one that goes idle afterwards would hold the shutdown for the keep-alive
 * timeout (72 s), so idle connections are closed every 50 ms until it is done.
 *
 * @example
 * ```ts
 * const port = await serveHttp(await buildApp(config), { ...config, service: 'gateway' });
 * ```
 */
export async function serveHttp(
  app: HttpApp,
  options: { port: number; host: string; service: string; warnings?: readonly string[] },
): Promise<number> {
  for (const warning of options.warnings ?? []) app.log.warn(warning);
  onShutdown(app.log, async () => {
    const closeIdle = setInterval(() => app.server.closeIdleConnections(), 50);
    try {
      await app.close();
    } finally {
      clearInterval(closeIdle);
    }
  });
  await app.listen({ port: options.port, host: options.host }).catch((error: unknown) => {
    throw listenFailure(error, options);
  });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : options.port;
  // The service is the logger's own field (createLogger(settings, service)): not written twice.
  app.log.info({ port }, 'listening');
  return port;
}
