import Type from 'typebox';
import { describe, expect, it } from 'vitest';
import { readEnv } from './env.js';
import { clusterNodes, RedisEnv } from './redis.js';

describe('Redis settings', () => {
  it('reads Cluster start-up nodes from HERALD_REDIS_CLUSTER_NODES', () => {
    expect(clusterNodes({ HERALD_REDIS_CLUSTER_NODES: 'a:1,10.0.0.2:7002' })).toEqual([
      { host: 'a', port: 1 },
      { host: '10.0.0.2', port: 7002 },
    ]);
    expect(clusterNodes({})).toBeUndefined();
  });

  it('refuses a REDIS_URL without a host (ioredis would quietly connect to 127.0.0.1:6379)', () => {
    const read = (url: string) => () => readEnv('test', Type.Object(RedisEnv), { REDIS_URL: url });
    for (const url of [
      'redis://:pw@',
      'redis://',
      'rediss://user:pw@/0',
      'redis://:6379',
      'http://redis:6379',
    ])
      expect(read(url), url).toThrow(/REDIS_URL must be a redis:\/\/ or rediss:\/\/ URL with a host/);
    for (const url of [
      'redis://127.0.0.1:6379',
      'redis://:pw@redis:6379/1',
      'rediss://user:p%40ss@cache.example.com',
      'redis://[::1]:6379',
      'redis://:p@ss@redis:6379',
    ])
      expect(read(url)().values.REDIS_URL, url).toBe(url);
  });

  it('refuses HERALD_REDIS_CLUSTER_NODES that are not host:port pairs with ports 1 to 65535, saying so', () => {
    const read = (nodes: string) => () =>
      readEnv('test', Type.Object(RedisEnv), { HERALD_REDIS_CLUSTER_NODES: nodes });
    for (const nodes of ['foo', 'foo,bar:99999', 'a:0', 'a:1,', ':7000', 'a:7000,b'])
      expect(read(nodes), nodes).toThrow(
        /HERALD_REDIS_CLUSTER_NODES must be host:port pairs separated by commas, each port 1 to 65535/,
      );
    for (const nodes of [
      'a:1',
      'redis-0.redis:6379,10.0.0.2:65535',
      '10.0.0.1:7000,10.0.0.2:7001,10.0.0.3:7002',
    ])
      expect(read(nodes)().values.HERALD_REDIS_CLUSTER_NODES, nodes).toBe(nodes);
  });
});
