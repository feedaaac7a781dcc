// The published JavaScript: esbuild bundles the entry points (the client, its server helpers, and
// `push-message` for service workers; ESM, ES2023, source maps) and shortens the members of the
// client's internal state object, `Core`, whose names start with `_`. The client's modules share it,
// so its members cannot be `#private`, and an app's bundler shortens `#private` names but no property
// names: spelled out, they cost about 300 B min+gzip (`test/size.test.ts` holds the budget). Nothing
// public starts with `_`: not the API, the types or the messages between tabs. Not minified otherwise
// (an app's bundler does that; Node's stack traces keep the names). `tsc` writes the `.d.ts` files
// (see `package.json`).
import { rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = fileURLToPath(new URL('..', import.meta.url));
rmSync(`${root}dist`, { recursive: true, force: true });
await build({
  absWorkingDir: root,
  entryPoints: ['src/index.ts', 'src/server.ts', 'src/push-message.ts'],
  outdir: 'dist',
  bundle: true,
  splitting: false,
  format: 'esm',
  platform: 'neutral',
  target: 'es2023',
  packages: 'external',
  mangleProps: /^_/,
  sourcemap: true,
  logLevel: 'warning',
});
