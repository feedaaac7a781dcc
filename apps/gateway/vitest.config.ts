import { heraldTestConfig } from '@herald/testing/vitest';

export default heraldTestConfig({
  // Files that start apps and servers: loaded once per worker, not once per file (see the option).
  isolate: false,
  // Each on a redis-server or a Cluster of its own (outages, a replica), never on the run's Redis.
  notOnCluster: [
    'test/health.test.ts',
    'test/idempotency-outage.test.ts',
    'test/limiter-timeout.test.ts',
    'test/live-publish-outage.test.ts',
    'test/queue-cluster-start.test.ts',
    'test/redis-outage.test.ts',
    'test/unsure-changes.test.ts',
  ],
});
