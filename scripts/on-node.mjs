#!/usr/bin/env node
// Runs a package's tests (Vitest) on another Node.js major, fetched from the npm registry with
// `npx -p node@<major>`: Node 20 is past its end of life and Herald must also run on Node 24 LTS. The
// apps a test starts use the test's own Node (`startApp` spawns `process.execPath`), so every process
// of the run is on that major. Exits with Vitest's exit code.
// Usage: node scripts/on-node.mjs <major> <package dir> [vitest args...]
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';

const [major, packageDir, ...vitestArgs] = process.argv.slice(2);
if (!major || !/^\d+$/.test(major) || !packageDir) {
  console.error('usage: on-node.mjs <major> <package dir> [vitest args...]');
  process.exit(2);
}
const cwd = resolve(packageDir);
// The package's own Vitest, as `vitest` would run there.
const vitest = join(
  dirname(createRequire(join(cwd, 'package.json')).resolve('vitest/package.json')),
  'vitest.mjs',
);
const npx = process.platform === 'win32' ? 'npx.cmd' : 'npx';
const run = spawnSync(npx, ['--yes', '-p', `node@${major}`, 'node', '--version'], { cwd, encoding: 'utf8' });
const version = run.stdout.trim();
if (run.status !== 0 || !version.startsWith(`v${major}.`)) {
  console.error(
    `on-node: could not get Node ${major} from the npm registry (npx -p node@${major}):\n${run.stderr}`,
  );
  process.exit(1);
}
console.log(`on-node: ${packageDir} on Node ${version}`);
const tests = spawnSync(npx, ['--yes', '-p', `node@${major}`, 'node', vitest, 'run', ...vitestArgs], {
  cwd,
  stdio: 'inherit',
});
process.exit(tests.status ?? 1);
