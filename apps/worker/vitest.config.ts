import { heraldTestConfig } from '@herald/testing/vitest';

export default heraldTestConfig({
  // On redis-servers of its own (an outage, a Redis that is not there yet).
  notOnCluster: ['test/health.test.ts'],
});
