import { fileURLToPath } from 'node:url';
import { defineConfig, type ViteUserConfig } from 'vitest/config';

/** Path of the global setup that finds (or starts) the Redis the tests use. */
export const redisGlobalSetup = fileURLToPath(new URL('./global-setup.js', import.meta.url));

/**
 * The Vitest config every Herald package uses: unit tests beside the code and integration tests in
 * `test/`, one Redis found by `global-setup`, generous timeouts (real processes on a busy machine).
 *
 * @example
 * ```ts
 * // vitest.config.ts
 * export default heraldTestConfig();
 * ```
 */
export function heraldTestConfig(): ViteUserConfig {
  return defineConfig({
    test: {
      include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
      globalSetup: [redisGlobalSetup],
      testTimeout: 60_000,
      hookTimeout: 60_000,
    },
  });
}
