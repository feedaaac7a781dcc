import type { UserConfig } from 'vite';

/**
 * What both builds share: Preact's automatic JSX runtime (compiled by Vite's own oxc transform, so no
 * Babel preset), ES2022 (native `#private`, as `@herald/client` is measured), minified by oxc.
 */
export const shared = {
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: { target: 'es2022', sourcemap: true },
  // The SDK's dist is ESM already; nothing to pre-bundle for the dev server beyond Vite's defaults.
  clearScreen: false,
} satisfies UserConfig;
