import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { waitFor } from '@herald/testing';
import { describe, expect, it } from 'vitest';

const LOGGING = fileURLToPath(new URL('../dist/logging.js', import.meta.url));

// An app that logs, then on SIGTERM logs once more and exits: as every Herald app shuts down.
const APP = `
const { createLogger } = await import(${JSON.stringify(LOGGING)});
const log = createLogger({ level: 'info', format: process.env.FORMAT }, 'app');
process.on('SIGTERM', () => {
  log.info('shutting down');
  setTimeout(() => process.exit(0), 50);
});
// Last: the test sends SIGTERM once it reads this line.
log.info('started');
setInterval(() => {}, 1000);
`;

describe('logging', () => {
  it.each(['pretty', 'json'])(
    'HERALD_LOG_FORMAT=%s: an app whose output nobody reads any more (the launcher killed) stops at once on SIGTERM',
    async (format) => {
      const app = spawn(process.execPath, ['--input-type=module', '-e', APP], {
        env: { ...process.env, FORMAT: format },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let exited = false;
      app.once('exit', () => {
        exited = true;
      });
      try {
        await new Promise<void>((resolve) => app.stdout?.once('data', () => resolve()));
        // What the one-terminal stack's launcher leaves when it is killed: a pipe with no reader.
        app.stdout?.destroy();
        app.kill('SIGTERM');
        // pino's transport thread, its write refused (EPIPE), made the exit wait 10 s for it.
        await waitFor(() => exited, { timeoutMs: 5000, what: `the ${format} app to exit` });
        expect({ code: app.exitCode, signal: app.signalCode }).toEqual({ code: 0, signal: null });
      } finally {
        app.kill('SIGKILL');
      }
    },
    20_000,
  );
});
