import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    globalSetup: [fileURLToPath(import.meta.resolve('@herald/testing/global-setup'))],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
