import Type from 'typebox';
import { describe, expect, it } from 'vitest';
import { readEnv } from './env.js';
import { clusterNodes, createRedis, RedisEnv } from './redis.js';

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

  it('a REDIS_URL database this Redis does not have stops the connection and says so, instead of going on in database 0', async () => {
    const url = new URL(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
    url.pathname = '/9999';
    const redis = createRedis({ url: url.toString() }, 'producer');
    const errors: string[] = [];
    redis.on('error', (error: Error) => errors.push(error.message));
    try {
      const deadline = Date.now() + 4_000;
      while (!errors.some((message) => message.includes('REDIS_URL')) && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 20));
      expect(errors.find((message) => message.includes('REDIS_URL'))).toMatch(
        /REDIS_URL selects database 9999, which this Redis does not have/,
      );
      // Nothing goes to database 0 meanwhile.
      await expect(redis.set('herald-config-test:db', '1')).rejects.toThrow();
    } finally {
      redis.disconnect();
    }
  });
});
