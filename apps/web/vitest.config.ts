import { heraldTestConfig } from '@herald/testing/vitest';

export default heraldTestConfig({
  // Starts the one-terminal stack with a redis-server of its own (never the run's Redis).
  notOnCluster: ['test/stack-launcher.test.ts'],
});
