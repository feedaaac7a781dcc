import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { HERALD_VARIABLES } from '@herald/config';
import { freePort } from '@herald/testing';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  APP_LOAD_CONFIG,
  APP_VARIABLES,
  HEALTH_PATHS,
  requiredVariables,
  SHUTDOWN_MS,
  webApiPrefix,
} from './support/apps.js';
import {
  type ComposeFile,
  composeText,
  composeVolumeSource,
  healthcheckUrl,
  imageSource,
  interpolate,
  loadCompose,
  MissingVariableError,
  REPO,
  servicesOf,
} from './support/compose.js';
import { nginxLocations, nginxUpstreams } from './support/nginx.js';

const TEST_ENV = {
  HERALD_JWT_SECRET: 'k7Qz2mB9xL4vN8pR1sT6wY3cF5hJ0aD2eG7iK9oU1qE=',
  HERALD_API_KEYS: 'none',
  REDIS_PASSWORD: '4f1c9a7e2b8d6f3a5c0e9b7d1f2a4c6e8b0d2f4a6c8e0b2d4f6a8c0e2b4d6f8a',
};
const compose = loadCompose(TEST_ENV);
/** As written, before interpolation (aliases and merge keys resolved). */
const raw = parse(composeText(), { merge: true }) as ComposeFile;
const all = Object.entries(compose.services);
const apps = all.filter(([, service]) => service.build);
const oneShot = (name: string) => compose.services[name]?.restart === 'no';
const parseSeconds = (value: string) => Number(/^(\d+)s$/.exec(value)?.[1]);

describe('docker-compose.yml against the apps', () => {
  it('refuses to start until REDIS_PASSWORD, HERALD_JWT_SECRET and HERALD_API_KEYS are set, naming each', () => {
    const required: string[] = [];
    const env: Record<string, string> = {};
    for (;;) {
      try {
        loadCompose(env);
        break;
      } catch (error) {
        if (!(error instanceof MissingVariableError)) throw error;
        expect(error.message, `${error.variable}'s message says how to make one`).toMatch(
          /openssl rand -(base64|hex) 32/,
        );
        required.push(error.variable);
        env[error.variable] = 'x';
      }
    }
    expect(required.sort()).toEqual(['HERALD_API_KEYS', 'HERALD_JWT_SECRET', 'REDIS_PASSWORD']);
    // Empty counts as unset (`:?`), as the apps count an empty variable as unset.
    expect(() => loadCompose({ ...TEST_ENV, HERALD_JWT_SECRET: '' })).toThrow(MissingVariableError);
    // biome-ignore lint/suspicious/noTemplateCurlyInString: compose's syntax, not a template
    expect(interpolate('a$$b ${X:-d} ${Y-e}', { Y: '' })).toBe('a$b d ');
  });

  it('passes each app only variables it reads, every HERALD_* one a known setting', () => {
    for (const [name, service] of apps) {
      const { packageName } = imageSource(service);
      for (const variable of Object.keys(service.environment ?? {})) {
        expect(APP_VARIABLES[packageName], `${name}: ${variable}`).toContain(variable);
        if (variable.startsWith('HERALD_'))
          expect(HERALD_VARIABLES, `${name}: ${variable}`).toContain(variable);
      }
    }
  });

  // biome-ignore lint/suspicious/noTemplateCurlyInString: compose's syntax, not a template
  it('gives every app what it needs in production; a required one comes as ${VAR:?message}', () => {
    for (const [name, service] of apps) {
      const load = APP_LOAD_CONFIG[imageSource(service).packageName];
      if (!load) continue;
      const environment = service.environment ?? {};
      expect(() => load(environment), name).not.toThrow();
      const required = requiredVariables(load, environment);
      for (const variable of Object.keys(environment)) {
        const refused = required.includes(variable);
        // REDIS_URL has a default; without the password in it an app would start and fail later (the
        // cluster profile's nodes have none: see the compose file).
        if (refused || (variable === 'REDIS_URL' && !service.profiles)) {
          expect(raw.services[name]?.environment?.[variable], `${name}: ${variable}`).toMatch(
            /\$\{[A-Z_]+:\?.+\}/,
          );
        }
      }
    }
  });

  it('builds each app from its own Dockerfile: stages exist, Node 24, non-root, the same command', () => {
    for (const [name, service] of apps) {
      const source = imageSource(service);
      expect(existsSync(join(REPO, service.build?.context ?? '', '.dockerignore')), name).toBe(true);
      const stages = [...source.text.matchAll(/^FROM \S+ AS (\S+)$/gm)].map((match) => match[1]);
      for (const from of source.text.matchAll(/--from=(\S+)/g)) expect(stages, name).toContain(from[1]);
      expect(source.text, name).toMatch(/^ARG NODE_IMAGE=node:24-/m);
      expect(source.text, name).toMatch(new RegExp(`turbo prune ${source.packageName} --docker`));
      expect(source.text, name).toMatch(new RegExp(`pnpm deploy --filter=${source.packageName} --prod`));
      expect(
        source.text.split('\n').findLast((line) => line.startsWith('USER ')),
        name,
      ).toBe('USER node');
      if (service.entrypoint) expect(service.entrypoint, name).toEqual(source.entrypoint);
      else {
        expect(service.command, name).toEqual(source.cmd);
        expect(source.exposed, name).toEqual([Number(service.environment?.PORT)]);
      }
      const [, script] = service.entrypoint ?? service.command ?? [];
      expect(existsSync(join(source.packageDir, script as string)), `${name}: ${script} is built`).toBe(true);
    }
  });

  it('keeps secrets and build output out of the build context (.dockerignore)', () => {
    const ignored = readFileSync(join(REPO, '.dockerignore'), 'utf8').split('\n');
    for (const entry of ['.env', '**/node_modules', '**/dist', '.git']) expect(ignored).toContain(entry);
  });

  it('checks every long-running service with a healthcheck on its /healthz, on its own port', () => {
    for (const [name, service] of all) {
      if (oneShot(name)) continue;
      expect(service.healthcheck, name).toBeDefined();
      expect(service.restart, name).toBe('unless-stopped');
      if (!service.build) continue;
      const url = healthcheckUrl(service.healthcheck as never);
      expect(url?.pathname, name).toBe(HEALTH_PATHS.liveness);
      expect(url?.port, name).toBe(service.environment?.PORT);
    }
  });

  it('starts a service after its dependencies are healthy (a one-shot: completed)', () => {
    for (const [name, service] of all) {
      for (const [dependency, { condition }] of Object.entries(service.depends_on ?? {})) {
        expect(compose.services[dependency], `${name} → ${dependency}`).toBeDefined();
        expect(condition, `${name} → ${dependency}`).toBe(
          oneShot(dependency) ? 'service_completed_successfully' : 'service_healthy',
        );
      }
    }
  });

  it('lets each app finish its shutdown: stop_grace_period above the apps’ grace', () => {
    for (const [name, service] of apps) {
      if (oneShot(name)) continue;
      expect(parseSeconds(service.stop_grace_period ?? '10s') * 1000, name).toBeGreaterThan(SHUTDOWN_MS);
    }
  });

  it('runs Redis with its password (the healthcheck too), the apps reach it with the password', () => {
    const redis = compose.services.redis;
    expect(redis?.command?.join(' ')).toContain('--requirepass "$REDIS_PASSWORD"');
    expect(redis?.environment).toEqual({
      REDIS_PASSWORD: TEST_ENV.REDIS_PASSWORD,
      REDISCLI_AUTH: TEST_ENV.REDIS_PASSWORD,
    });
    for (const [name, service] of servicesOf(compose, 'tools').filter(([, s]) => s.environment?.REDIS_URL)) {
      expect(service.environment?.REDIS_URL, name).toBe(`redis://:${TEST_ENV.REDIS_PASSWORD}@redis:6379`);
    }
  });

  it('runs in production: no development mode, the same JWT secret on the gateway and realtime, admin only when set', () => {
    for (const [name, service] of apps) {
      expect(service.environment?.HERALD_DEV_MODE, name).toBeUndefined();
      expect(service.environment?.HERALD_DEMO_API_KEY, name).toBeUndefined();
    }
    for (const name of ['realtime-1', 'realtime-2']) {
      expect(compose.services[name]?.environment?.HERALD_JWT_SECRET).toBe(TEST_ENV.HERALD_JWT_SECRET);
    }
    expect(compose.services.gateway?.environment?.HERALD_ADMIN_KEY).toBe('');
    const adminKey = 'Yb3nQ8vK2mX7pL4tW9sD1fG6hJ0aZ5cE';
    expect(
      loadCompose({ ...TEST_ENV, HERALD_ADMIN_KEY: adminKey }).services.gateway?.environment
        ?.HERALD_ADMIN_KEY,
    ).toBe(adminKey);
  });

  it('an app healthcheck fails (exit 1) when nothing answers on its port', async () => {
    const test = compose.services.gateway?.healthcheck?.test ?? [];
    expect(test.slice(0, 3)).toEqual(['CMD', 'node', '-e']);
    const port = await freePort();
    const code = await new Promise<number | null>((resolve) => {
      const child = spawn(process.execPath, ['-e', String(test[3]).replace(':3000/', `:${port}/`)]);
      child.once('exit', resolve);
    });
    expect(code).toBe(1);
  });

  it('publishes only the balancer: Redis and the apps stay on the compose network (the cluster profile: its gateway and realtime server on this machine only)', () => {
    const published = servicesOf(compose)
      .filter(([, service]) => service.ports?.length)
      .map(([name]) => name);
    expect(published).toEqual(['lb']);
    const cluster = servicesOf(compose, 'cluster').filter(([, service]) => service.ports?.length);
    expect(cluster.map(([name]) => name).sort()).toEqual(['gateway-cluster', 'lb', 'realtime-cluster']);
    for (const [name, service] of cluster) {
      if (name === 'lb') continue;
      for (const port of service.ports ?? []) expect(String(port), name).toMatch(/^127\.0\.0\.1:\d+:\d+$/);
    }
  });

  it('runs two workers and two realtime servers by default, and a 3+3 Redis Cluster in the cluster profile', () => {
    const defaults = servicesOf(compose);
    expect(compose.services.worker?.deploy?.replicas).toBe(2);
    const realtime = defaults.filter(([, s]) => s.build && imageSource(s).packageName === '@herald/realtime');
    expect(realtime.map(([name]) => name)).toEqual(['realtime-1', 'realtime-2']);
    const nodes = servicesOf(compose, 'cluster').filter(([name]) => name.startsWith('redis-node-'));
    expect(nodes).toHaveLength(6);
    for (const [, node] of nodes) expect(node.command?.join(' ')).toContain('--cluster-enabled yes');
    expect(compose.services['redis-cluster-init']?.command?.join(' ')).toContain('--cluster-replicas 1');
    // A gateway on the Cluster too: without one nothing reached the Cluster's worker and realtime server.
    for (const name of ['gateway-cluster', 'worker-cluster', 'realtime-cluster']) {
      const environment = compose.services[name]?.environment ?? {};
      expect(environment.HERALD_DEPLOYMENT, name).toBe('herald-cluster');
      expect(environment.HERALD_PUBSUB_MODE, name).toBe('sharded');
      // The queue spread over the 3 masters: a multiple of them, the same in both apps.
      expect(Number(environment.HERALD_QUEUE_PARTITIONS) % 3, name).toBe(0);
      expect(environment.HERALD_QUEUE_PARTITIONS, name).toBe(
        compose.services['worker-cluster']?.environment?.HERALD_QUEUE_PARTITIONS,
      );
      for (const node of (environment.HERALD_REDIS_CLUSTER_NODES ?? '').split(',')) {
        expect(compose.services[node.split(':')[0] as string], `${name}: ${node}`).toBeDefined();
      }
    }
    // Its masters have replicas: the gateway and the worker wait for one (README, HERALD_REDIS_WAIT_REPLICAS).
    for (const name of ['gateway-cluster', 'worker-cluster']) {
      expect(compose.services[name]?.environment?.HERALD_REDIS_WAIT_REPLICAS, name).toBe('1');
    }
  });
});

describe('the balancer (infra/nginx/herald.conf) against compose and the web pages', () => {
  const lb = compose.services.lb;
  const config = readFileSync(
    composeVolumeSource(lb ?? {}, '/etc/nginx/conf.d/default.conf') as string,
    'utf8',
  );
  const upstreams = nginxUpstreams(config);
  const locations = nginxLocations(config);
  const addressOf = (name: string) => `${name}:${compose.services[name]?.environment?.PORT}`;

  it('routes / to web, /api/ to the gateway with /api stripped, /socket.io/ to both realtime servers', () => {
    expect(upstreams.get(locations.get('/')?.upstream ?? '')).toEqual([addressOf('web')]);
    expect(locations.get('/api/')?.stripsPrefix).toBe(true);
    expect(upstreams.get(locations.get('/api/')?.upstream ?? '')).toEqual([addressOf('gateway')]);
    expect(locations.get('/socket.io/')?.stripsPrefix).toBe(false);
    expect(upstreams.get(locations.get('/socket.io/')?.upstream ?? '')).toEqual([
      addressOf('realtime-1'),
      addressOf('realtime-2'),
    ]);
    expect(config).toMatch(/proxy_set_header Upgrade \$http_upgrade;/);
    expect(config).toMatch(/proxy_set_header Connection \$connection_upgrade;/);
  });

  it('serves the paths the web pages use: the dashboard’s API prefix, Socket.IO’s default path', () => {
    expect(locations.has(`${webApiPrefix()}/`)).toBe(true);
    expect(locations.has('/socket.io/')).toBe(true);
  });

  it('answers its own healthcheck and waits for every upstream to be healthy', () => {
    expect(locations.has(healthcheckUrl(lb?.healthcheck as never)?.pathname ?? '')).toBe(true);
    for (const name of ['web', 'gateway', 'realtime-1', 'realtime-2'])
      expect(lb?.depends_on?.[name]?.condition, name).toBe('service_healthy');
  });
});
