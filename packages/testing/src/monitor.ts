import { connect, type Socket } from 'node:net';

/** The commands one Redis server ran since {@link monitorRedis} started, as MONITOR shows them. */
export interface RedisMonitor {
  /** Each command with its arguments, in the order the server ran them (e.g. `['evalsha', sha, '2', …]`). */
  readonly commands: string[][];
  /** Calls `listener` with every command from now on. */
  onCommand(listener: (args: string[]) => void): void;
  close(): void;
}

/**
 * MONITOR on a raw socket to `host:port`, settled once the server confirmed it. ioredis's `monitor()`
 * has a race (ioredis/built/DataHandler.js): it enters monitoring mode a microtask after MONITOR's `+OK`,
 * so the lines that arrive in the same chunk as that `+OK` (a busy server) are taken for replies to
 * nothing and emitted as "Command queue state error", an uncaught error that fails the test file.
 *
 * @example
 * ```ts
 * const monitor = await monitorRedis({ host: '127.0.0.1', port: 6379 });
 * // … work …
 * const evals = monitor.commands.filter(([command]) => /^evalsha$/i.test(command ?? ''));
 * monitor.close();
 * ```
 */
export async function monitorRedis(target: { host: string; port: number } | string): Promise<RedisMonitor> {
  const { host, port } =
    typeof target === 'string'
      ? { host: new URL(target).hostname, port: Number(new URL(target).port || 6379) }
      : target;
  const socket: Socket = connect({ host, port });
  const commands: string[][] = [];
  const listeners: ((args: string[]) => void)[] = [];
  let buffered = '';
  let confirmed: (() => void) | undefined;
  let failed: ((error: Error) => void) | undefined;
  const ready = new Promise<void>((resolve, reject) => {
    confirmed = resolve;
    failed = reject;
  });
  socket.setEncoding('utf8');
  socket.on('error', (error) => failed?.(error));
  socket.on('data', (chunk: string) => {
    buffered += chunk;
    for (let end = buffered.indexOf('\r\n'); end >= 0; end = buffered.indexOf('\r\n')) {
      const line = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      if (line === '+OK') {
        confirmed?.();
      } else if (line.startsWith('-')) {
        failed?.(new Error(`MONITOR refused: ${line.slice(1)}`));
      } else if (line.startsWith('+')) {
        const args = monitorArgs(line);
        commands.push(args);
        for (const listener of listeners) listener(args);
      }
    }
  });
  socket.write('MONITOR\r\n');
  await ready;
  return {
    commands,
    onCommand: (listener) => listeners.push(listener),
    close: () => socket.destroy(),
  };
}

/** The quoted arguments of one MONITOR line (`+<time> [<db> <client>] "cmd" "arg" …`), unescaped. */
export function monitorArgs(line: string): string[] {
  const args: string[] = [];
  let i = line.indexOf('] "');
  if (i < 0) return args;
  i += 2;
  while (i < line.length && line[i] === '"') {
    let arg = '';
    i++;
    while (i < line.length && line[i] !== '"') {
      const char = line[i] as string;
      if (char === '\\') {
        const next = line[i + 1] ?? '';
        if (next === 'x') {
          arg += String.fromCharCode(Number.parseInt(line.slice(i + 2, i + 4), 16));
          i += 4;
          continue;
        }
        arg += { n: '\n', r: '\r', t: '\t', a: '\x07', b: '\b' }[next] ?? next;
        i += 2;
        continue;
      }
      arg += char;
      i++;
    }
    args.push(arg);
    i += 2; // the closing quote and the space before the next argument
  }
  return args;
}
