import { heraldTestConfig } from '@herald/testing/vitest';

export default heraldTestConfig({
  // One Redis's batching (one script call per turn, counted with MONITOR), then a Cluster of its own
  // (one call per slot): both run in the run on one Redis.
  notOnCluster: ['test/append-batch.test.ts', 'test/stale-slots.test.ts'],
});
