import { heraldTestConfig } from '@herald/testing/vitest';

export default heraldTestConfig({
  // Files that start apps and servers: loaded once per worker, not once per file (see the option).
  isolate: false,
  // On redis-servers of its own (an outage, a Redis that is not there yet).
  notOnCluster: ['test/health.test.ts'],
});
