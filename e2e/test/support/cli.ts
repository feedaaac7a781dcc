import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

// The `herald` bin of @herald/cli, as an operator runs it.
const cliPackage = createRequire(import.meta.url).resolve('@herald/cli/package.json');
const cliEntry = join(dirname(cliPackage), 'dist', 'bin.js');

/** An API key created by `herald keys create`: its id and the key itself. */
export interface CreatedKey {
  id: string;
  key: string;
}

/**
 * Runs the operator CLI (`herald …`) as its own process, as an operator would. `out` is what it wrote to
 * stdout and stderr, `err` stderr alone. `firstLineOnly`: its stdout is closed after the first line, as
 * `herald … | head -1` does.
 */
export async function herald(
  args: string[],
  env: Record<string, string>,
  options: { firstLineOnly?: boolean } = {},
): Promise<{ code: number; out: string; err: string }> {
  const child = spawn(process.execPath, [cliEntry, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString();
    if (options.firstLineOnly && out.includes('\n')) child.stdout.destroy();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    out += chunk.toString();
    err += chunk.toString();
  });
  const code = await new Promise<number>((resolve) => child.once('exit', (c) => resolve(c ?? 1)));
  return { code, out, err };
}

/** Creates an API key of `tenant` (stored hashed in Redis) with `herald keys create`. */
export async function createKey(
  env: Record<string, string>,
  tenant: string,
  extra: string[] = [],
): Promise<CreatedKey> {
  const { code, out } = await herald(['keys', 'create', '--name', tenant, '--tenant', tenant, ...extra], env);
  const key = /key:\s+(hk_\S+)/.exec(out)?.[1];
  const id = /id:\s+(\S+)/.exec(out)?.[1];
  if (code !== 0 || !key || !id) throw new Error(`herald keys create failed (${code}): ${out}`);
  return { id, key };
}
