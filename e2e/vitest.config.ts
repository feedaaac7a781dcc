import { heraldTestConfig } from '@herald/testing/vitest';

export default heraldTestConfig({
  // Files that start apps and servers: loaded once per worker, not once per file (see the option).
  isolate: false,
  // Each on Redis servers or a Cluster of its own (outages, failovers, replicas, its own fan-out rate).
  notOnCluster: [
    'test/cluster.test.ts',
    'test/cluster-auth.test.ts',
    'test/cluster-config.test.ts',
    'test/cluster-failover.test.ts',
    'test/cluster-restart.test.ts',
    'test/fanout-durable.test.ts',
    'test/health.test.ts',
    'test/replica-readiness.test.ts',
    'test/store-outage-order.test.ts',
    'test/topics.test.ts',
  ],
});
