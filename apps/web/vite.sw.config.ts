import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';
import { shared } from './vite.shared.js';

/**
 * The page's service worker: one classic script at `dist/public/herald-sw.js` (a service worker's scope
 * is its own folder and below, so it sits at the root), nothing shared with the pages' chunks.
 */
export default defineConfig({
  ...shared,
  build: {
    ...shared.build,
    outDir: 'dist/public',
    emptyOutDir: false,
    modulePreload: false,
    rolldownOptions: {
      input: fileURLToPath(new URL('./src/sw/herald-sw.ts', import.meta.url)),
      output: { entryFileNames: 'herald-sw.js', codeSplitting: false, format: 'iife' },
    },
  },
});
