import { hostname } from 'node:os';
import Type from 'typebox';
import { describe, expect, it } from 'vitest';
import { InstanceIdEnv, readServerEnv, ServerEnv } from './app-env.js';
import { secretFingerprint } from './deployment.js';
import { ConfigError } from './env.js';

const STRONG = 'k7Qp2vX9mB4nR8sT1wY6zA3cD5fG0hJq';
// What the apps spread beside ServerEnv: the inbox prefix is one of the settings they must agree on.
const Inbox = { HERALD_INBOX_PREFIX: Type.String({ default: 'herald:inbox:' }) };

describe('readServerEnv', () => {
  it('the common part of a server configuration, and the settings its deployment compares', () => {
    const schema = Type.Object({ ...ServerEnv(3002), ...Inbox, ...InstanceIdEnv });
    const { server } = readServerEnv('worker', schema, {
      HERALD_QUEUE_NAME: 'jobs',
      HERALD_INBOX_PREFIX: 'i:',
    });
    expect(server).toMatchObject({
      port: 3002,
      host: '0.0.0.0',
      redisUrl: 'redis://127.0.0.1:6379',
      redisClusterNodes: undefined,
      queue: { name: 'jobs', prefix: '{herald}', partitions: 1 },
      keyPrefix: 'herald:',
      instanceId: `worker-${hostname()}-${process.pid}`,
      log: { level: 'info', format: 'json' },
      warnings: [],
    });
    // An app without secrets records no JWT fingerprint.
    expect(server.deployment).toEqual({
      name: 'herald',
      settings: {
        HERALD_QUEUE_NAME: 'jobs',
        HERALD_QUEUE_PREFIX: '{herald}',
        HERALD_QUEUE_PARTITIONS: '1',
        HERALD_INBOX_PREFIX: 'i:',
        HERALD_PUBSUB_KEY: 'herald',
        HERALD_PUBSUB_MODE: 'classic',
        HERALD_KEY_PREFIX: 'herald:',
      },
    });
    expect(readServerEnv('worker', schema, { HERALD_INSTANCE_ID: 'w-1' }).server.instanceId).toBe('w-1');
  });

  it('with secrets: checked (or, with check: false, only read), their fingerprint recorded', () => {
    const schema = Type.Object({ ...ServerEnv(3001), ...Inbox });
    expect(() => readServerEnv('realtime', schema, {}, { apiKeys: false })).toThrow(ConfigError);
    expect(() => readServerEnv('realtime', schema, {}, { apiKeys: false })).toThrow(
      /HERALD_JWT_SECRET is not set/,
    );
    expect(readServerEnv('gateway', schema, {}, { apiKeys: true, check: false }).secrets.apiKeys).toEqual([]);
    const { server, secrets } = readServerEnv(
      'realtime',
      schema,
      { HERALD_JWT_SECRET: STRONG },
      { apiKeys: false },
    );
    expect(secrets.jwtSecret).toBe(STRONG);
    expect(server.deployment.settings.HERALD_JWT_SECRET).toBe(secretFingerprint(STRONG));
    expect(server.instanceId).toBe(`realtime-${hostname()}-${process.pid}`);
  });
});
