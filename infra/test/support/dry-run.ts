import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import {
  type AppProcess,
  freePort,
  type RedisServerHandle,
  startApp,
  startRedisServer,
  waitFor,
} from '@herald/testing';
import { Redis } from 'ioredis';
import { APP_DEFAULT_PORT, SHUTDOWN_MS } from './apps.js';
import { type ComposeService, composeVolumeSource, imageSource, loadCompose, servicesOf } from './compose.js';

/** The Node that runs the apps (INFRA_NODE: another one, e.g. Node 24 to try the images' runtime). */
const NODE = process.env.INFRA_NODE ?? process.execPath;
const NGINX_CONFIG_TARGET = '/etc/nginx/conf.d/default.conf';

/** Where nginx is (Debian puts it in /usr/sbin, not always on a non-root PATH). */
export function nginxBinary(): string {
  for (const candidate of ['nginx', '/usr/sbin/nginx']) {
    if (spawnSync(candidate, ['-v'], { stdio: 'ignore' }).status === 0) return candidate;
  }
  throw new Error('nginx is not installed: apt-get install -y nginx-light (.ci/run installs it)');
}

/** One running copy of a compose service. */
export interface Instance {
  service: string;
  /** Its loopback port, standing for the container port. */
  port: number;
  app?: AppProcess;
}

/** `infra/redis/redis.conf` as redis-server arguments (`appendonly yes` → `--appendonly yes`). */
export function redisConfArgs(file: string): string[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith('#'))
    .flatMap((line) => {
      const [key, ...values] = line.split(/\s+/);
      return [`--${key}`, ...values.map((value) => (value === '""' ? '' : value))];
    });
}

/** The service's container port: redis 6379, nginx its `listen`, an app its PORT (or its default). */
function containerPort(service: ComposeService): number {
  if (service.image?.startsWith('redis:')) return 6379;
  if (service.image?.startsWith('nginx:')) {
    const config = readFileSync(composeVolumeSource(service, NGINX_CONFIG_TARGET) as string, 'utf8');
    return Number(/^\s*listen (\d+);/m.exec(config)?.[1]);
  }
  const { packageName } = imageSource(service);
  return Number(service.environment?.PORT ?? APP_DEFAULT_PORT[packageName]);
}

/**
 * The compose dry run: every service `docker compose up` starts, as a local process with the
 * service's environment (interpolated from `env`), its hosts mapped to loopback ports; each started
 * once its `depends_on` are healthy by its own healthcheck; the balancer is the real nginx with
 * infra/nginx/herald.conf, only its upstream addresses and listen port changed.
 */
export class ComposeDryRun {
  readonly instances = new Map<string, Instance[]>();
  readonly services: Map<string, ComposeService>;
  #redis: RedisServerHandle | undefined;
  #nginx: ReturnType<typeof spawn> | undefined;
  #nginxDir: string | undefined;
  /** `<service>:<container port>` → the loopback port. */
  readonly #address = new Map<string, number>();

  constructor(readonly env: Record<string, string>) {
    this.services = new Map(servicesOf(loadCompose(env)));
  }

  /** `http://127.0.0.1:<port>` of the first instance of `service`. */
  url(service: string): string {
    return `http://127.0.0.1:${this.instances.get(service)?.[0]?.port}`;
  }

  /** `value` with every `<service>:<port>` of the compose network replaced by its loopback address. */
  rewrite(value: string): string {
    return value.replace(
      /(?<![A-Za-z0-9.-])([a-z][a-z0-9-]*):(\d+)/g,
      (match, host: string, port: string) => {
        const mapped = this.#address.get(`${host}:${port}`);
        return mapped === undefined ? match : `127.0.0.1:${mapped}`;
      },
    );
  }

  environmentOf(service: ComposeService): Record<string, string> {
    return Object.fromEntries(
      Object.entries(service.environment ?? {}).map(([name, value]) => [name, this.rewrite(String(value))]),
    );
  }

  async start(): Promise<void> {
    for (const [name, service] of this.services) {
      const replicas = service.deploy?.replicas ?? 1;
      const instances: Instance[] = [];
      for (let i = 0; i < replicas; i++) instances.push({ service: name, port: await freePort() });
      this.instances.set(name, instances);
      this.#address.set(`${name}:${containerPort(service)}`, instances[0]?.port as number);
    }
    const healthy = new Set<string>();
    while (healthy.size < this.services.size) {
      const next = [...this.services].filter(
        ([name, service]) =>
          !healthy.has(name) && Object.keys(service.depends_on ?? {}).every((dep) => healthy.has(dep)),
      );
      if (next.length === 0) throw new Error('depends_on has a cycle or names a service that is not started');
      await Promise.all(next.map(([name, service]) => this.#startService(name, service)));
      for (const [name] of next) healthy.add(name);
    }
  }

  async #startService(name: string, service: ComposeService): Promise<void> {
    const instances = this.instances.get(name) ?? [];
    if (service.image?.startsWith('redis:')) {
      const [instance] = instances;
      const conf = composeVolumeSource(service, '/usr/local/etc/redis/redis.conf') as string;
      this.#redis = await startRedisServer({ port: instance?.port as number, args: redisConfArgs(conf) });
      // The compose command's `--requirepass "$REDIS_PASSWORD"`, set once the server answers.
      const password = service.environment?.REDIS_PASSWORD as string;
      const admin = new Redis(this.#redis.url, { lazyConnect: true });
      await admin.connect();
      await admin.config('SET', 'requirepass', password);
      admin.disconnect();
    } else if (service.image?.startsWith('nginx:')) {
      await this.#startNginx(service, instances[0]?.port as number);
    } else {
      const source = imageSource(service);
      const [program, script, ...rest] = service.command ?? source.cmd;
      if (program !== 'node' || !script) throw new Error(`${name}: command is not node <script>`);
      await Promise.all(
        instances.map(async (instance, i) => {
          instance.app = await startApp({
            name: `${name}-${i + 1}`,
            entry: '',
            command: NODE,
            // The image's WORKDIR is the app's folder: `dist/server.js` there is the app's own.
            args: [resolve(source.packageDir, script), ...rest],
            env: { ...this.environmentOf(service), PORT: String(instance.port) },
            // Generous: seven Node processes start at once on a 2-core machine.
            timeoutMs: 90_000,
          });
        }),
      );
    }
    await Promise.all(instances.map((instance) => this.#healthy(name, service, instance)));
  }

  /** Runs the service's healthcheck (its own command, the port mapped) until it passes. */
  async #healthy(name: string, service: ComposeService, instance: Instance): Promise<void> {
    const check = service.healthcheck;
    if (!check) throw new Error(`${name} has no healthcheck`);
    const port = String(containerPort(service));
    const [form, ...rest] = check.test;
    const mapped = rest.map((arg) => arg.replaceAll(`127.0.0.1:${port}`, `127.0.0.1:${instance.port}`));
    let command: string;
    let args: string[];
    if (form === 'CMD-SHELL') {
      command = 'sh';
      args = ['-c', (mapped[0] ?? '').replace(/\bredis-cli\b/g, `redis-cli -p ${instance.port}`)];
    } else {
      command = mapped[0] === 'node' ? NODE : (mapped[0] as string);
      args = mapped.slice(1);
    }
    await waitFor(
      () =>
        new Promise<boolean>((done) => {
          const child = spawn(command, args, {
            env: { ...process.env, ...this.environmentOf(service) },
            stdio: 'ignore',
          });
          child.once('error', () => done(false));
          child.once('exit', (code) => done(code === 0));
        }),
      { timeoutMs: 90_000, intervalMs: 200, what: `${name}'s healthcheck (${check.test.join(' ')})` },
    );
  }

  async #startNginx(service: ComposeService, port: number): Promise<void> {
    const source = composeVolumeSource(service, NGINX_CONFIG_TARGET) as string;
    const dir = mkdtempSync(join(tmpdir(), 'herald-nginx-'));
    this.#nginxDir = dir;
    // nginx's workers run as nobody when the master is root (CI): they must reach their temp folders.
    chmodSync(dir, 0o755);
    for (const temp of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) {
      mkdirSync(join(dir, temp));
      chmodSync(join(dir, temp), 0o777);
    }
    const herald = readFileSync(source, 'utf8')
      .replace(
        /^(\s*server\s+)([a-z0-9-]+:\d+)/gm,
        (_, lead: string, address: string) => lead + this.rewrite(address),
      )
      .replace(/^(\s*listen\s+)(\d+);/m, (_, lead: string) => `${lead}127.0.0.1:${port};`);
    writeFileSync(join(dir, 'herald.conf'), herald);
    writeFileSync(
      join(dir, 'nginx.conf'),
      [
        'daemon off;',
        'worker_processes 2;',
        `pid ${join(dir, 'nginx.pid')};`,
        `error_log ${join(dir, 'error.log')} warn;`,
        'events { worker_connections 1024; }',
        'http {',
        '  access_log off;',
        ...['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map(
          (temp) => `  ${temp === 'body' ? 'client_body' : temp}_temp_path ${join(dir, temp)};`,
        ),
        // As the image's /etc/nginx/nginx.conf includes conf.d/default.conf.
        `  include ${join(dir, 'herald.conf')};`,
        '}',
      ].join('\n'),
    );
    const nginx = nginxBinary();
    const test = spawnSync(nginx, ['-t', '-p', dir, '-c', join(dir, 'nginx.conf')], { encoding: 'utf8' });
    if (test.status !== 0) throw new Error(`nginx -t refused ${source}:\n${test.stderr}`);
    this.#nginx = spawn(nginx, ['-p', dir, '-c', join(dir, 'nginx.conf')], { stdio: 'ignore' });
  }

  /** Runs a one-shot service (`docker compose run --rm <service> <args>`): exit code and output. */
  async run(name: string, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
    const service = loadCompose(this.env).services[name];
    if (!service) throw new Error(`no service ${name}`);
    const source = imageSource(service);
    const [program, script, ...rest] = service.entrypoint ?? source.entrypoint ?? [];
    if (program !== 'node' || !script) throw new Error(`${name}: entrypoint is not node <script>`);
    const child = spawn(NODE, [resolve(source.packageDir, script), ...rest, ...args], {
      env: { PATH: process.env.PATH ?? '', ...this.environmentOf(service) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (data) => {
      stdout += data;
    });
    child.stderr.on('data', (data) => {
      stderr += data;
    });
    const code = await new Promise<number | null>((done) => child.once('exit', done));
    return { code, stdout, stderr };
  }

  /** SIGTERM to every app (what `docker compose down` sends): each one's exit code, by instance name. */
  async stop(): Promise<Map<string, number | null>> {
    const codes = new Map<string, number | null>();
    // nginx's graceful stop; the apps get SIGTERM, as `docker compose down` sends.
    if (this.#nginx?.exitCode === null) this.#nginx.kill('SIGQUIT');
    const apps = [...this.instances.values()]
      .flat()
      .flatMap((instance) => (instance.app ? [instance.app] : []));
    await Promise.all(
      apps.map(async (app) => codes.set(app.name, await app.stop('SIGTERM', SHUTDOWN_MS + 5_000))),
    );
    await this.#redis?.dispose();
    if (this.#nginx && this.#nginx.exitCode === null && this.#nginx.signalCode === null) {
      await new Promise((done) => {
        const timer = setTimeout(() => this.#nginx?.kill('SIGKILL'), 5_000);
        this.#nginx?.once('exit', () => done(clearTimeout(timer)));
      });
    }
    if (this.#nginxDir) rmSync(this.#nginxDir, { recursive: true, force: true });
    return codes;
  }
}
