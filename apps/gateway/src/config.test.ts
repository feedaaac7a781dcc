import { HERALD_VARIABLES } from '@herald/config';
import { DEV_JWT_SECRET } from '@herald/protocol';
import { expectEach, refusal } from '@herald/testing';
import { describe, expect, it } from 'vitest';
import { DEV_ADMIN_KEY, DEV_API_KEY, EnvSchema, loadConfig } from './config.js';

const SECRET = 'gw-unit-secret-7Qp2vX9mB4nR8sT1wY6z';
const KEY = 'gw-unit-key-k7Qp2vX9mB4nR8sT1wY6zA3c';
const production = { HERALD_JWT_SECRET: SECRET, HERALD_API_KEYS: KEY };

const refusedBy = (env: Record<string, string | undefined>): string => refusal(() => loadConfig(env));

describe('gateway configuration', () => {
  it('unset: production refuses to start and says exactly what to set', () => {
    const message = refusedBy({});
    expect(message).toMatch(/^Invalid gateway configuration \(2 problems\)/);
    expect(message).toContain('HERALD_JWT_SECRET is not set: set it to 32+ random bytes');
    expect(message).toContain('or to `none` and create keys with `herald keys create`');
    expect(message).toContain('HERALD_DEV_MODE=true');
  });

  it('empty counts as unset (what docker compose writes for an unset VAR in "VAR: $VAR")', () => {
    expect(refusedBy({ HERALD_JWT_SECRET: '', HERALD_API_KEYS: '', HERALD_DEV_MODE: '' })).toContain(
      'HERALD_JWT_SECRET is not set',
    );
    const config = loadConfig({ ...production, PORT: '', HERALD_TOKEN_TTL_SECONDS: '', REDIS_URL: '' });
    expect(config).toMatchObject({ port: 3000, tokenTtlSeconds: 3600, redisUrl: 'redis://127.0.0.1:6379' });
  });

  it('production with strong secrets: defaults, no development key, no warning', () => {
    const config = loadConfig(production);
    expect(config).toMatchObject({
      devMode: false,
      apiKeys: [KEY],
      usingDevApiKey: false,
      jwtSecret: SECRET,
      usingDevJwtSecret: false,
      port: 3000,
      host: '0.0.0.0',
      rateLimit: { perSecond: 10, burst: 10, senderPerSecond: 100, senderBurst: 200, failure: 'closed' },
      warnings: [],
      // No HERALD_ADMIN_KEY in production: the admin API is off.
      adminKey: undefined,
      usingDevAdminKey: false,
    });
    expect(Object.isFrozen(config)).toBe(true);
    expect(loadConfig({ ...production, HERALD_API_KEYS: 'none' }).apiKeys).toEqual([]);
  });

  it('runs on Redis Cluster: HERALD_REDIS_CLUSTER_NODES, and HERALD_REDIS_WAIT_REPLICAS for replica acknowledgement', () => {
    expect(loadConfig(production)).toMatchObject({ redisClusterNodes: undefined, redisWaitReplicas: 0 });
    const config = loadConfig({
      ...production,
      HERALD_REDIS_CLUSTER_NODES: '10.0.0.1:7000,10.0.0.2:7001',
      HERALD_REDIS_WAIT_REPLICAS: '1',
    });
    expect(config).toMatchObject({
      redisClusterNodes: [
        { host: '10.0.0.1', port: 7000 },
        { host: '10.0.0.2', port: 7001 },
      ],
      redisWaitReplicas: 1,
    });
    expect(refusedBy({ ...production, HERALD_REDIS_WAIT_REPLICAS: '-1' })).toContain(
      'HERALD_REDIS_WAIT_REPLICAS',
    );
    // BullMQ's keys of one queue must share a slot: the prefix needs a hash tag on Cluster.
    expect(
      refusedBy({ ...production, HERALD_REDIS_CLUSTER_NODES: '10.0.0.1:7000', HERALD_QUEUE_PREFIX: 'bull' }),
    ).toContain('HERALD_QUEUE_PREFIX');
  });

  it('production refuses the development key and secret, and weak secrets', () => {
    const message = refusedBy({ HERALD_JWT_SECRET: DEV_JWT_SECRET, HERALD_API_KEYS: `${DEV_API_KEY},short` });
    expect(message).toContain('HERALD_JWT_SECRET is the public development secret');
    expect(message).toContain('HERALD_API_KEYS key #1 is the public development key "dev-key"');
    expect(message).toContain('HERALD_API_KEYS key #2 is shorter than 32 bytes');
    expect(refusedBy({ ...production, HERALD_JWT_SECRET: 'z'.repeat(48) })).toContain(
      'one character repeated',
    );
    expect(refusedBy({ ...production, HERALD_ADMIN_KEY: DEV_ADMIN_KEY })).toContain(
      'HERALD_ADMIN_KEY is the public development admin key',
    );
    expect(refusedBy({ ...production, HERALD_ADMIN_KEY: KEY })).toContain(
      'HERALD_ADMIN_KEY is also one of HERALD_API_KEYS',
    );
    // The key itself never appears in a message.
    expect(refusedBy({ ...production, HERALD_ADMIN_KEY: KEY })).not.toContain(KEY);
  });

  it('development mode: dev-key and the development secret, with loud warnings', () => {
    const config = loadConfig({ HERALD_DEV_MODE: 'true' });
    expect(config).toMatchObject({
      devMode: true,
      apiKeys: [DEV_API_KEY],
      usingDevApiKey: true,
      jwtSecret: DEV_JWT_SECRET,
      usingDevJwtSecret: true,
    });
    expect(config.warnings).toEqual([
      expect.stringMatching(/^DEVELOPMENT MODE/),
      expect.stringMatching(/HERALD_JWT_SECRET: using the public development secret/),
      expect.stringMatching(/HERALD_API_KEYS: accepting the public development key "dev-key"/),
      expect.stringMatching(/HERALD_ADMIN_KEY: accepting the public development admin key "dev-admin-key"/),
    ]);
    expect(config).toMatchObject({ adminKey: DEV_ADMIN_KEY, usingDevAdminKey: true });
    // Explicit values are still checked in development mode.
    expect(refusedBy({ HERALD_DEV_MODE: 'true', HERALD_API_KEYS: 'test-key-1' })).toContain(
      'HERALD_API_KEYS key #1 is shorter than 32 bytes',
    );
    expect(refusedBy({ ...production, HERALD_DEV_MODE: 'yes' })).toContain('HERALD_DEV_MODE must be boolean');
  });

  it('invalid values and Infinity: every problem in one message', () => {
    const message = refusedBy({
      ...production,
      PORT: '65536',
      HERALD_RATE_LIMIT_PER_SECOND: 'Infinity',
      HERALD_RATE_LIMIT_BURST: '1e999',
      HERALD_SENDER_RATE_LIMIT_PER_SECOND: '0',
      HERALD_DURABILITY: 'fsync',
      REDIS_URL: 'http://redis:6379',
    });
    expectEach(message, [
      /\(6 problems\)/,
      'PORT must be <= 65535',
      'HERALD_RATE_LIMIT_PER_SECOND must be a finite decimal number (got "Infinity")',
      'HERALD_RATE_LIMIT_BURST must be a finite decimal number',
      'HERALD_SENDER_RATE_LIMIT_PER_SECOND must be >= 0.000001',
      'HERALD_DURABILITY must be one of: redis, aof',
      'REDIS_URL must be a redis:// or rediss:// URL with a host',
    ]);
    expect(message).not.toContain('http://redis:6379');
  });

  it('absurd magnitudes are refused, naming each: a rate or burst beyond what the buckets count exactly, an idempotency record or inbox kept for ever, braces in the limiter prefix', () => {
    const message = refusedBy({
      ...production,
      HERALD_RATE_LIMIT_PER_SECOND: '1e300',
      HERALD_RATE_LIMIT_BURST: '100000000000000000000',
      HERALD_SENDER_RATE_LIMIT_BURST: '2000000000',
      HERALD_TOKEN_RATE_LIMIT_PER_SECOND: '1e10',
      HERALD_INBOX_RATE_LIMIT_BURST: '1e12',
      // A bucket refilled that slowly outlives what Redis takes as an expiry: every decision failed.
      HERALD_INBOX_RATE_LIMIT_PER_SECOND: '1e-300',
      HERALD_EXPECTED_GATEWAYS: '1000000',
      HERALD_IDEMPOTENCY_TTL_SECONDS: '100000000000000',
      HERALD_INBOX_MAX_AGE_MS: '1e20',
      HERALD_INBOX_RECORD_GRACE_MS: '1e15',
      HERALD_RATE_LIMIT_PREFIX: 'rl{x}:',
    });
    expectEach(message, [
      /\(11 problems\)/,
      'HERALD_RATE_LIMIT_PER_SECOND must be <= 1000000000',
      'HERALD_INBOX_RATE_LIMIT_PER_SECOND must be >= 0.000001',
      'HERALD_RATE_LIMIT_BURST must be <= 1000000000',
      'HERALD_SENDER_RATE_LIMIT_BURST must be <= 1000000000',
      'HERALD_TOKEN_RATE_LIMIT_PER_SECOND must be <= 1000000000',
      'HERALD_INBOX_RATE_LIMIT_BURST must be <= 1000000000',
      'HERALD_EXPECTED_GATEWAYS must be <= 1000',
      'HERALD_IDEMPOTENCY_TTL_SECONDS must be <= 2592000',
      'HERALD_INBOX_MAX_AGE_MS must be <= 315360000000',
      'HERALD_INBOX_RECORD_GRACE_MS must be <= 31536000000',
      'HERALD_RATE_LIMIT_PREFIX must match',
    ]);
    // The largest of each is taken.
    expect(
      loadConfig({
        ...production,
        HERALD_RATE_LIMIT_PER_SECOND: '1000000000',
        HERALD_RATE_LIMIT_BURST: '1000000000',
        HERALD_EXPECTED_GATEWAYS: '1000',
        HERALD_IDEMPOTENCY_TTL_SECONDS: '2592000',
        HERALD_INBOX_MAX_AGE_MS: '315360000000',
        HERALD_INBOX_RECORD_GRACE_MS: '31536000000',
      }),
    ).toBeDefined();
  });

  it('unknown HERALD_* variables are warned about (a typo gets a suggestion), not read', () => {
    const config = loadConfig({ ...production, HERALD_TOKEN_TTL_SECOND: '60', NODE_ENV: 'production' });
    expect(config.tokenTtlSeconds).toBe(3600);
    expect(config.warnings).toEqual([
      'HERALD_TOKEN_TTL_SECOND is not a Herald setting and is ignored: did you mean HERALD_TOKEN_TTL_SECONDS?',
    ]);
    // A mistyped secret: the refusal explains why the real one looks unset.
    expect(refusedBy({ HERALD_API_KEYS: KEY, HERALD_JWT_SECRETT: SECRET })).toContain(
      'HERALD_JWT_SECRETT is not a Herald setting and is ignored: did you mean HERALD_JWT_SECRET?',
    );
  });

  it('the operator CLI (secrets: false) needs no secret', () => {
    expect(loadConfig({ HERALD_KEY_PREFIX: 'x:' }, { secrets: false }).keyPrefix).toBe('x:');
  });

  it('every variable it reads is a known Herald setting (and so in the README table)', () => {
    const own = Object.keys(EnvSchema.properties).filter((name) => name.startsWith('HERALD_'));
    expect(own.filter((name) => !HERALD_VARIABLES.includes(name))).toEqual([]);
  });
});
