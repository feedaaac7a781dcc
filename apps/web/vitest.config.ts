import { heraldTestConfig } from '@herald/testing/vitest';

export default heraldTestConfig({
  // Files that start apps and servers: loaded once per worker, not once per file (see the option).
  isolate: false,
  // Starts the one-terminal stack with a redis-server of its own (never the run's Redis).
  notOnCluster: ['test/stack-launcher.test.ts'],
});
