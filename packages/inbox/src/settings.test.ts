import { describe, expect, it } from 'vitest';
import { clusterNodes, inboxSettings } from './settings.js';

describe('inbox settings', () => {
  it('maps parsed env values to Inbox options and cluster nodes', () => {
    expect(
      inboxSettings({ HERALD_INBOX_PREFIX: 'p:', HERALD_INBOX_MAX_LENGTH: 5, HERALD_INBOX_MAX_AGE_MS: 1000 }),
    ).toEqual({ prefix: 'p:', maxLength: 5, maxAgeMs: 1000 });
    expect(clusterNodes({ HERALD_REDIS_CLUSTER_NODES: 'a:1,10.0.0.2:7002' })).toEqual([
      { host: 'a', port: 1 },
      { host: '10.0.0.2', port: 7002 },
    ]);
    expect(clusterNodes({})).toBeUndefined();
  });
});
