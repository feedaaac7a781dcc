// The browser client's size, min+gzip, with socket.io-client inside: esbuild bundles `dist/index.js`
// the way an app's bundler would (browser, ESM, minified, production), zlib gzips it at level 9.
// Prints JSON; `test/size.test.ts` holds the budget.
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';

export async function measure() {
  const result = await build({
    entryPoints: [fileURLToPath(new URL('../dist/index.js', import.meta.url))],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    minify: true,
    write: false,
    define: { 'process.env.NODE_ENV': '"production"' },
    logLevel: 'silent',
  });
  const code = result.outputFiles[0].contents;
  return { minBytes: code.length, gzipBytes: gzipSync(code, { level: 9 }).length };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  process.stdout.write(`${JSON.stringify(await measure())}\n`);
}
