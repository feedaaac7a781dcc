// The published JavaScript: esbuild bundles the two entry points (ESM, ES2023, source maps) and shortens
// the members of the client's internal objects, whose names start with `_` (the client's `Core`, shared
// by its modules, so they cannot be `#private`): an app's bundler can shorten `#private` names but no
// property names, so without this the split into modules would cost about 700 B min+gzip
// (`test/size.test.ts` holds the budget). Nothing public starts with `_`: not the API, not the types,
// not the messages between tabs. `tsc` writes the `.d.ts` files (see `package.json`).
import { rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = fileURLToPath(new URL('..', import.meta.url));
rmSync(`${root}dist`, { recursive: true, force: true });
await build({
  absWorkingDir: root,
  entryPoints: ['src/index.ts', 'src/server.ts'],
  outdir: 'dist',
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'neutral',
  target: 'es2023',
  packages: 'external',
  mangleProps: /^_/,
  sourcemap: true,
  logLevel: 'warning',
});
