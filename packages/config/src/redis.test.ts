import { describe, expect, it } from 'vitest';
import { clusterNodes } from './redis.js';

describe('Redis settings', () => {
  it('reads Cluster start-up nodes from HERALD_REDIS_CLUSTER_NODES', () => {
    expect(clusterNodes({ HERALD_REDIS_CLUSTER_NODES: 'a:1,10.0.0.2:7002' })).toEqual([
      { host: 'a', port: 1 },
      { host: '10.0.0.2', port: 7002 },
    ]);
    expect(clusterNodes({})).toBeUndefined();
  });
});
