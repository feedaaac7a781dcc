import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';
import { shared } from './vite.shared.js';

const root = fileURLToPath(new URL('.', import.meta.url));
/** Every page is an `.html` file in this folder: `index.html` (the inbox), and any page added beside it. */
const pages = Object.fromEntries(
  readdirSync(root)
    .filter((name) => name.endsWith('.html'))
    .map((name) => [name.slice(0, -'.html'.length), `${root}${name}`]),
);

/** The pages (a multi-page build into `dist/public`, served by `src/server`). */
export default defineConfig({
  ...shared,
  root,
  build: {
    ...shared.build,
    outDir: 'dist/public',
    emptyOutDir: true,
    rolldownOptions: { input: pages },
  },
});
