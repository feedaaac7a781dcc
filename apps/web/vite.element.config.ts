import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';
import { shared } from './vite.shared.js';

/**
 * `<herald-inbox>`: one self-contained ES module (Preact, the SDK and the styles inside, nothing
 * shared with the pages' chunks) at `dist/public/element/herald-inbox.js`, for any page to embed.
 */
export default defineConfig({
  ...shared,
  // Library mode does not replace it by itself: Preact's debug branches go when it reads "production".
  define: { 'process.env.NODE_ENV': '"production"' },
  build: {
    ...shared.build,
    outDir: 'dist/public/element',
    emptyOutDir: false,
    lib: {
      entry: fileURLToPath(new URL('./src/element/herald-inbox.tsx', import.meta.url)),
      formats: ['es'],
      fileName: () => 'herald-inbox.js',
    },
  },
});
