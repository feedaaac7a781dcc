import { defineConfig } from 'vitest/config';

/** `pnpm test:chaos`: the chaos suite (test/chaos), one scenario at a time, on its own redis-servers. */
export default defineConfig({
  test: {
    include: ['test/chaos/**/*.chaos.ts'],
    fileParallelism: false,
    testTimeout: 120_000,
    hookTimeout: 60_000,
  },
});
