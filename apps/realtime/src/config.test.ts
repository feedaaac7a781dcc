import { HERALD_VARIABLES } from '@herald/config';
import { DEV_JWT_SECRET } from '@herald/protocol';
import { refusal } from '@herald/testing';
import { describe, expect, it } from 'vitest';
import { EnvSchema, loadConfig } from './config.js';

const SECRET = 'rt-unit-secret-7Qp2vX9mB4nR8sT1wY6z';

const refusedBy = (env: Record<string, string | undefined>): string => refusal(() => loadConfig(env));

describe('realtime configuration', () => {
  it('unset or empty secret: production refuses to start and says what to set', () => {
    for (const env of [{}, { HERALD_JWT_SECRET: '' }]) {
      const message = refusedBy(env);
      expect(message).toMatch(/^Invalid realtime configuration \(1 problem\)/);
      expect(message).toContain('HERALD_JWT_SECRET is not set: set it to 32+ random bytes');
    }
  });

  it('a strong secret: defaults, no warning; HERALD_API_KEYS (the gateway’s) is ignored silently', () => {
    const config = loadConfig({ HERALD_JWT_SECRET: SECRET, HERALD_API_KEYS: 'short', PORT: '' });
    expect(config).toMatchObject({
      devMode: false,
      jwtSecret: SECRET,
      usingDevJwtSecret: false,
      port: 3001,
      allowPolling: false,
      maxConnectionsPerUser: 20,
      warnings: [],
    });
  });

  it('refuses the development secret in production and weak secrets always', () => {
    expect(refusedBy({ HERALD_JWT_SECRET: DEV_JWT_SECRET })).toContain('public development secret');
    expect(refusedBy({ HERALD_JWT_SECRET: 'sixteen-chars-ok' })).toContain('shorter than 32 bytes');
    expect(refusedBy({ HERALD_DEV_MODE: 'true', HERALD_JWT_SECRET: '#'.repeat(32) })).toContain(
      'one character repeated',
    );
  });

  it('development mode: the development secret, with loud warnings', () => {
    const config = loadConfig({ HERALD_DEV_MODE: 'true' });
    expect(config).toMatchObject({ devMode: true, jwtSecret: DEV_JWT_SECRET, usingDevJwtSecret: true });
    expect(config.warnings[0]).toMatch(/^DEVELOPMENT MODE/);
  });

  it('invalid values and Infinity', () => {
    const message = refusedBy({
      HERALD_JWT_SECRET: SECRET,
      HERALD_PING_INTERVAL_MS: 'Infinity',
      HERALD_ALLOW_POLLING: 'maybe',
      HERALD_PUBSUB_MODE: 'fast',
    });
    expect(message).toMatch(/\(3 problems\)/);
    expect(message).toContain('HERALD_PING_INTERVAL_MS must be a finite decimal number');
    expect(message).toContain('HERALD_ALLOW_POLLING must be boolean');
    expect(message).toContain('HERALD_PUBSUB_MODE must be one of: classic, sharded');
  });

  it('unknown HERALD_* variables are warned about, with a suggestion', () => {
    const config = loadConfig({ HERALD_JWT_SECRET: SECRET, HERALD_CORS_ORIGINS: 'https://a.example' });
    expect(config.corsOrigin).toBe('*');
    expect(config.warnings).toEqual([
      'HERALD_CORS_ORIGINS is not a Herald setting and is ignored: did you mean HERALD_CORS_ORIGIN?',
    ]);
  });

  it('every variable it reads is a known Herald setting (and so in the README table)', () => {
    const own = Object.keys(EnvSchema.properties).filter((name) => name.startsWith('HERALD_'));
    expect(own.filter((name) => !HERALD_VARIABLES.includes(name))).toEqual([]);
  });
});
