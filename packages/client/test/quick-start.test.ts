import { spawn } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { waitFor } from '@herald/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { randomId, Stack } from './support/stack.js';

const require = createRequire(import.meta.url);
const packageDir = fileURLToPath(new URL('..', import.meta.url));
const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');

/** The README's Quick start snippet, exactly as a reader saves it. */
function quickStart(): string {
  const anchor = readme.indexOf('save this as `packages/client/quick-start.mjs`');
  const start = readme.indexOf('```js\n', anchor);
  const end = readme.indexOf('```', start + 6);
  if (anchor < 0 || start < 0 || end < 0) throw new Error('Quick start snippet not found in README.md');
  return readme.slice(start + 6, end);
}

describe("the README's Quick start, saved where it says", () => {
  const stack = new Stack({ HERALD_DEV_MODE: 'true', HERALD_API_KEYS: '', HERALD_JWT_SECRET: '' });
  const file = `${packageDir}.quick-start-${randomId('t')}.mjs`;
  afterAll(async () => {
    rmSync(file, { force: true });
    await stack.dispose();
  });

  /** Saves `source` where the README says and runs it: the process, and the lines it printed so far. */
  function runSaved(source: string) {
    writeFileSync(file, source);
    const child = spawn(process.execPath, [file], { cwd: packageDir, stdio: 'pipe' });
    const lines: string[] = [];
    child.stdout.on('data', (chunk: Buffer) => lines.push(...chunk.toString().split('\n')));
    child.stderr.on('data', (chunk: Buffer) => lines.push(...chunk.toString().split('\n')));
    return { child, lines };
  }

  it('passes lint as written (the test command checks every file of the tree)', async () => {
    writeFileSync(file, quickStart());
    const biome = require.resolve('@biomejs/biome/bin/biome', { paths: [`${packageDir}../..`] });
    const child = spawn(process.execPath, [biome, 'check', file], { stdio: 'pipe' });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk));
    const code = await new Promise((resolve) => child.once('exit', resolve));
    expect(output).toMatch(/Checked 1 file/);
    expect(output).not.toMatch(/error|Formatter would have printed/i);
    expect(code).toBe(0);
  });

  it('receives the curl’s notification (development-mode stack; only the ports differ)', async () => {
    const [gateway, realtime] = await Promise.all([
      stack.start('gateway', 'gateway'),
      stack.start('realtime', 'rt'),
      stack.start('worker', 'worker'),
    ]);
    const source = quickStart()
      .replace('http://localhost:3000', gateway.url)
      .replace('http://localhost:3001', realtime.url);
    const { child, lines } = runSaved(source);
    try {
      await waitFor(() => lines.includes('connected as alice: now send the curl'), {
        timeoutMs: 20_000,
        what: `connected (output: ${lines.join(' | ')})`,
      });
      // The README's curl.
      const response = await fetch(`${gateway.url}/notify`, {
        method: 'POST',
        headers: { authorization: 'Bearer dev-key', 'content-type': 'application/json' },
        body: JSON.stringify({ userId: 'alice', payload: { title: 'Hello', body: 'from Herald' } }),
      });
      expect(response.status).toBe(202);
      const { id } = (await response.json()) as { id: string };
      const line = await waitFor(() => lines.find((l) => l.startsWith('notification ')), {
        what: 'the notification printed',
      });
      expect(JSON.parse(line.slice('notification '.length))).toMatchObject({
        id,
        userId: 'alice',
        payload: { title: 'Hello', body: 'from Herald' },
        read: false,
      });
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('says why it does not connect: a wrong API key, Herald not started, a realtime server not started', async () => {
    const gateway = await stack.start('gateway', 'gateway-2');
    for (const [what, source, expected] of [
      [
        'a wrong API key',
        quickStart()
          .replace('http://localhost:3000', gateway.url)
          .replace("apiKey: 'dev-key'", "apiKey: 'wrong-key'"),
        /^connecting \(HERALD_ERR_TOKEN_UNAVAILABLE: .+\)$/,
      ],
      [
        // What the README says it prints when Herald is not started.
        'Herald not started',
        quickStart()
          .replace('http://localhost:3000', 'http://127.0.0.1:9')
          .replace('http://localhost:3001', 'http://127.0.0.1:9'),
        /^connecting \(HERALD_ERR_TOKEN_UNAVAILABLE: .+\)$/,
      ],
      [
        'no realtime server',
        quickStart()
          .replace('http://localhost:3000', gateway.url)
          .replace('http://localhost:3001', 'http://127.0.0.1:9'),
        /^connecting \(HERALD_ERR_CONNECT: .+\)$/,
      ],
    ] as const) {
      const { child, lines } = runSaved(source);
      try {
        await waitFor(() => lines.some((line) => expected.test(line)), {
          timeoutMs: 20_000,
          what: `${what} told (output: ${lines.join(' | ')})`,
        });
      } finally {
        child.kill('SIGKILL');
      }
    }
  });
});
