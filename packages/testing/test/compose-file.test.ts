// The shipped docker-compose.yml, checked without a Docker engine: parsed with a YAML library and
// interpolated the way `docker compose` does, then held to the security rules of the README.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { HERALD_VARIABLES, resolveSecrets } from '@herald/config';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

const source = readFileSync(new URL('../../../docker-compose.yml', import.meta.url), 'utf8');

interface Service {
  command?: string[];
  environment?: Record<string, string>;
  ports?: string[];
  healthcheck?: { test: string[] };
}

/**
 * Compose's variable interpolation: `$$` is a literal `$`; `${VAR}`, `${VAR:-default}`,
 * `${VAR:?error}` (fails when VAR is unset or empty) and `$VAR`.
 */
function interpolate(text: string, env: Record<string, string>): { text: string; errors: string[] } {
  const errors: string[] = [];
  const out = text.replace(
    /\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g,
    (match, name?: string, op?: string, arg?: string, bare?: string) => {
      if (match === '$$') return '$';
      const variable = name ?? bare ?? '';
      const value = env[variable];
      const missing = op?.startsWith(':') ? value === undefined || value === '' : value === undefined;
      if (op?.endsWith('?') && missing) {
        errors.push(`${variable}: ${arg}`);
        return '';
      }
      if (op?.endsWith('-') && missing) return arg ?? '';
      return value ?? '';
    },
  );
  return { text: out, errors };
}

function services(env: Record<string, string>): { services: Record<string, Service>; errors: string[] } {
  const { text, errors } = interpolate(source, env);
  return { services: (parse(text) as { services: Record<string, Service> }).services, errors };
}

const SECRETS = {
  HERALD_JWT_SECRET: 'R3k9vQ2mX8pL5tW7yB4nC6hJ1sD0fG2aZ8xV',
  HERALD_API_KEYS: 'kQ7pV2xM9bN4rT8sW1yZ6aC3dF5gH0jL',
  REDIS_PASSWORD: '4f1c9e2b7a6d3e8f0c5b2a9d7e4f1c3b',
};
const APPS = ['gateway', 'worker', 'realtime'];

describe('docker-compose.yml', () => {
  it('without secrets, compose refuses to start and names each one with how to make it', () => {
    const { errors } = services({});
    const named = (variable: string) => errors.filter((error) => error.startsWith(`${variable}:`));
    expect(named('HERALD_JWT_SECRET')[0]).toMatch(/32\+ random bytes, e\.g\. openssl rand -base64 32/);
    expect(named('HERALD_API_KEYS')[0]).toMatch(/or to none and create keys with herald keys create/);
    expect(named('REDIS_PASSWORD')[0]).toMatch(/openssl rand -hex 32/);
    // An empty value is refused too (`:?`), as the apps count an empty variable as unset.
    expect(services({ ...SECRETS, HERALD_JWT_SECRET: '' }).errors).toEqual([
      expect.stringMatching(/^HERALD_JWT_SECRET: /),
      expect.stringMatching(/^HERALD_JWT_SECRET: /),
    ]);
  });

  it('runs Redis with a password and does not publish it (at most on 127.0.0.1)', () => {
    const { services: all, errors } = services(SECRETS);
    expect(errors).toEqual([]);
    const redis = all.redis as Service;
    expect(redis.command?.join(' ')).toContain('--requirepass "$REDIS_PASSWORD"');
    expect(redis.environment?.REDIS_PASSWORD).toBe(SECRETS.REDIS_PASSWORD);
    for (const port of redis.ports ?? []) expect(port).toMatch(/^127\.0\.0\.1:/);
    expect(redis.healthcheck?.test.join(' ')).toContain('redis-cli ping');
    expect(redis.environment?.REDISCLI_AUTH).toBe(SECRETS.REDIS_PASSWORD);
  });

  it.each(APPS)('%s: reaches Redis with the password and has a healthcheck on its own /healthz', (name) => {
    const service = services(SECRETS).services[name] as Service;
    const env = service.environment ?? {};
    expect(env.REDIS_URL).toBe(`redis://:${SECRETS.REDIS_PASSWORD}@redis:6379`);
    const probe = service.healthcheck?.test.join(' ') ?? '';
    expect(probe).toContain(`http://127.0.0.1:${env.PORT}/healthz`);
    for (const variable of Object.keys(env).filter((key) => key.startsWith('HERALD_'))) {
      expect(HERALD_VARIABLES).toContain(variable);
    }
  });

  it('the app healthcheck exits 0 when /healthz answers 200 and 1 when nothing answers (run with this node)', async () => {
    const test = services(SECRETS).services.gateway?.healthcheck?.test ?? [];
    expect(test.slice(0, 3)).toEqual(['CMD', 'node', '-e']);
    const server = createServer((request, response) => {
      response.writeHead(request.url === '/healthz' ? 200 : 404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    // Run asynchronously: this process's event loop must stay free to answer the probe.
    const probe = () =>
      new Promise<number | null>((resolve) => {
        const child = spawn(process.execPath, ['-e', String(test[3]).replace(':3000/', `:${port}/`)]);
        child.once('exit', (code) => resolve(code));
      });
    expect(await probe()).toBe(0);
    await new Promise((resolve) => server.close(resolve));
    expect(await probe()).toBe(1);
  });

  it('runs the web server in production (no demo token route), in front of the gateway and realtime, with a healthcheck', () => {
    const web = services(SECRETS).services.web as Service;
    const env = web.environment ?? {};
    expect(env.HERALD_DEV_MODE).toBeUndefined();
    expect(env.HERALD_DEMO_API_KEY).toBeUndefined();
    expect(env).toMatchObject({
      HERALD_GATEWAY_URL: 'http://gateway:3000',
      HERALD_REALTIME_URL: 'http://realtime:3001',
    });
    expect(web.healthcheck?.test.join(' ')).toContain(`http://127.0.0.1:${env.PORT}/healthz`);
    for (const variable of Object.keys(env).filter((key) => key.startsWith('HERALD_'))) {
      expect(HERALD_VARIABLES).toContain(variable);
    }
  });

  it('gives the gateway and the realtime server secrets they accept in production (no development mode)', () => {
    const all = services(SECRETS).services;
    const gateway = all.gateway?.environment ?? {};
    const realtime = all.realtime?.environment ?? {};
    expect(gateway.HERALD_DEV_MODE).toBeUndefined();
    expect(realtime.HERALD_DEV_MODE).toBeUndefined();
    expect(resolveSecrets(gateway, { apiKeys: true, adminKey: true })).toMatchObject({
      problems: [],
      // No HERALD_ADMIN_KEY: the admin API and the dashboard are off.
      adminKey: undefined,
    });
    expect(resolveSecrets(realtime, { apiKeys: false }).problems).toEqual([]);
    expect(realtime.HERALD_JWT_SECRET).toBe(gateway.HERALD_JWT_SECRET);
  });

  it('passes HERALD_ADMIN_KEY to the gateway when it is set (the admin API and the dashboard on)', () => {
    const adminKey = 'Yb3nQ8vK2mX7pL4tW9sD1fG6hJ0aZ5cE';
    const gateway = services({ ...SECRETS, HERALD_ADMIN_KEY: adminKey }).services.gateway?.environment ?? {};
    expect(resolveSecrets(gateway, { apiKeys: true, adminKey: true })).toMatchObject({
      problems: [],
      adminKey,
    });
  });
});
