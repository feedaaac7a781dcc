import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';
import { shared } from './vite.shared.js';

/**
 * `<herald-inbox>`: one self-contained ES module (Preact, the SDK and the styles inside, nothing
 * shared with the pages' chunks) at `dist/public/element/herald-inbox.js`, for any page to embed.
 * An app build with a script entry rather than library mode: library mode keeps an ES bundle's
 * whitespace for the embedding app's bundler, and this file is served as it is.
 */
export default defineConfig({
  ...shared,
  build: {
    ...shared.build,
    outDir: 'dist/public/element',
    emptyOutDir: false,
    modulePreload: false,
    rolldownOptions: {
      input: fileURLToPath(new URL('./src/element/herald-inbox.tsx', import.meta.url)),
      output: { entryFileNames: 'herald-inbox.js', codeSplitting: false },
      // Keep the element's class exported (embedders may subclass it or use its `tokenFrom`).
      preserveEntrySignatures: 'exports-only',
    },
  },
});
