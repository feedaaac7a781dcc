// What a browser downloads, min+gzip: the files Vite built (minified by its oxc minifier), gzipped by
// zlib at level 9, the method of the peers' figures in the README. Prints JSON; test/size.test.ts holds
// the budget. Run after a build.
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

const dist = fileURLToPath(new URL('../dist/public/', import.meta.url));

function size(path) {
  const code = readFileSync(path);
  return { minBytes: code.length, gzipBytes: gzipSync(code, { level: 9 }).length };
}

export function measure() {
  const pageScripts = readdirSync(`${dist}assets`).filter((name) => name.endsWith('.js'));
  const page = pageScripts
    .map((name) => size(`${dist}assets/${name}`))
    .reduce(
      (sum, one) => ({ minBytes: sum.minBytes + one.minBytes, gzipBytes: sum.gzipBytes + one.gzipBytes }),
      {
        minBytes: 0,
        gzipBytes: 0,
      },
    );
  return { element: size(`${dist}element/herald-inbox.js`), pages: page };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  process.stdout.write(`${JSON.stringify(measure())}\n`);
}
