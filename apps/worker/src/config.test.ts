import { HERALD_VARIABLES } from '@herald/config';
import { expectEach, refusal } from '@herald/testing';
import { describe, expect, it } from 'vitest';
import { EnvSchema, loadConfig } from './config.js';

const refusedBy = (env: Record<string, string | undefined>): string => refusal(() => loadConfig(env));

describe('worker configuration', () => {
  it('unset or empty: the defaults (the worker holds no secret, so it needs none)', () => {
    for (const env of [{}, { PORT: '', HERALD_WORKER_CONCURRENCY: '', HERALD_JWT_SECRET: '' }]) {
      expect(loadConfig(env)).toMatchObject({
        port: 3002,
        host: '0.0.0.0',
        redisUrl: 'redis://127.0.0.1:6379',
        concurrency: 50,
        queue: { name: 'notifications', prefix: '{herald}', partitions: 1 },
        partitions: [0],
        warnings: [],
      });
    }
  });

  it('queue partitions: all of them by default, or the share HERALD_WORKER_PARTITIONS names', () => {
    expect(loadConfig({ HERALD_QUEUE_PARTITIONS: '4' }).partitions).toEqual([0, 1, 2, 3]);
    expect(loadConfig({ HERALD_QUEUE_PARTITIONS: '4', HERALD_WORKER_PARTITIONS: '3,1' }).partitions).toEqual([
      1, 3,
    ]);
    expect(
      loadConfig({ HERALD_QUEUE_PARTITIONS: '8', HERALD_WORKER_PARTITIONS: '0-2, 6' }).partitions,
    ).toEqual([0, 1, 2, 6]);
    expectEach(refusedBy({ HERALD_QUEUE_PARTITIONS: '4', HERALD_WORKER_PARTITIONS: '4', PORT: '-1' }), [
      /^Invalid worker configuration \(2 problems\)/,
      'HERALD_WORKER_PARTITIONS: partition 4 does not exist: HERALD_QUEUE_PARTITIONS=4 makes partitions 0 to 3',
      'PORT must be >= 0',
    ]);
    expect(refusedBy({ HERALD_QUEUE_PARTITIONS: '0' })).toContain('HERALD_QUEUE_PARTITIONS must be >= 1');
    expect(refusedBy({ HERALD_QUEUE_PARTITIONS: '2000' })).toContain(
      'HERALD_QUEUE_PARTITIONS must be <= 1024',
    );
  });

  it('invalid values and Infinity: every problem in one message', () => {
    const message = refusedBy({
      HERALD_WORKER_CONCURRENCY: 'Infinity',
      HERALD_WORKER_LOCK_MS: '10',
      PORT: '-1',
      HERALD_REDIS_CLUSTER_NODES: 'nodes',
    });
    expectEach(message, [
      /^Invalid worker configuration \(4 problems\)/,
      'HERALD_WORKER_CONCURRENCY must be a finite decimal number (got "Infinity")',
      'HERALD_WORKER_LOCK_MS must be >= 1000',
      'PORT must be >= 0',
      'HERALD_REDIS_CLUSTER_NODES must be host:port pairs separated by commas, each port 1 to 65535',
    ]);
  });

  it('unknown HERALD_* variables are warned about; other apps’ variables are ignored silently', () => {
    const config = loadConfig({
      HERALD_WORKER_CONCURENCY: '5',
      HERALD_API_KEYS: 'none',
      HERALD_DEV_MODE: 'true',
    });
    expect(config.concurrency).toBe(50);
    expect(config.warnings).toEqual([
      'HERALD_WORKER_CONCURENCY is not a Herald setting and is ignored: did you mean HERALD_WORKER_CONCURRENCY?',
    ]);
  });

  it('every variable it reads is a known Herald setting (and so in the README table)', () => {
    const own = Object.keys(EnvSchema.properties).filter((name) => name.startsWith('HERALD_'));
    expect(own.filter((name) => !HERALD_VARIABLES.includes(name))).toEqual([]);
  });
});
