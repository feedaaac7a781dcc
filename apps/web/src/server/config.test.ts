import { HERALD_VARIABLES } from '@herald/config';
import { describe, expect, it } from 'vitest';
import { EnvSchema, loadConfig } from './config.js';

describe('web server configuration', () => {
  it('defaults: port 3003, the stack’s gateway and realtime, no demo route outside development mode', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      port: 3003,
      devMode: false,
      gatewayUrl: 'http://127.0.0.1:3000',
      realtimeUrl: 'http://127.0.0.1:3001',
      demo: undefined,
    });
  });

  it('development mode: the demo route mints with dev-key for alice unless told otherwise', () => {
    expect(loadConfig({ HERALD_DEV_MODE: 'true' }).demo).toEqual({ apiKey: 'dev-key', userId: 'alice' });
    expect(
      loadConfig({
        HERALD_DEV_MODE: 'true',
        HERALD_DEMO_API_KEY: `${'k'.repeat(8)}x`,
        HERALD_DEMO_USER: 'bob',
      }).demo,
    ).toEqual({ apiKey: 'kkkkkkkkx', userId: 'bob' });
  });

  it('refuses a demo API key in production, and bad URLs, naming each', () => {
    expect(() =>
      loadConfig({ HERALD_DEMO_API_KEY: 'some-key', HERALD_GATEWAY_URL: 'localhost:3000' }),
    ).toThrow(/HERALD_DEMO_API_KEY is set but HERALD_DEV_MODE is not true[\s\S]*HERALD_GATEWAY_URL/);
  });

  it('refuses an upstream URL that does not parse, or has no host or a bad port, naming the variable', () => {
    const bad = {
      HERALD_GATEWAY_URL: ['http://', 'https://[::1', 'http://:3000', 'http://x:99999', 'http://a b'],
      HERALD_REALTIME_URL: ['http://bad host', 'http://x:99999/', 'https://'],
    };
    for (const [name, values] of Object.entries(bad)) {
      for (const value of values) {
        expect(() => loadConfig({ [name]: value }), `${name}=${value}`).toThrow(
          `${name} (${JSON.stringify(value)}) is not a URL with a host`,
        );
      }
    }
    // Both named in one message.
    expect(() => loadConfig({ HERALD_GATEWAY_URL: 'http://', HERALD_REALTIME_URL: 'http://:1' })).toThrow(
      /HERALD_GATEWAY_URL[\s\S]*HERALD_REALTIME_URL/,
    );
    expect(
      loadConfig({ HERALD_GATEWAY_URL: 'http://[::1]:3000', HERALD_REALTIME_URL: 'https://rt.example.com/' }),
    ).toMatchObject({
      gatewayUrl: 'http://[::1]:3000',
      realtimeUrl: 'https://rt.example.com',
    });
  });

  it('refuses a demo user in production: a demo setting outside development mode is a mistake, not a no-op', () => {
    expect(() => loadConfig({ HERALD_DEMO_USER: 'bob' })).toThrow(
      /HERALD_DEMO_USER is set but HERALD_DEV_MODE is not true/,
    );
    // Empty is unset (a compose file's `HERALD_DEMO_USER=`).
    expect(loadConfig({ HERALD_DEMO_USER: '' }).demo).toBeUndefined();
  });

  it('strips a trailing slash from the upstream URLs', () => {
    expect(loadConfig({ HERALD_REALTIME_URL: 'http://rt:3001/' }).realtimeUrl).toBe('http://rt:3001');
  });

  it('every variable it reads is a known Herald setting (and so in the README table)', () => {
    const own = Object.keys(EnvSchema.properties).filter((name) => name.startsWith('HERALD_'));
    expect(own.filter((name) => !HERALD_VARIABLES.includes(name))).toEqual([]);
  });
});
