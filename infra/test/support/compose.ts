import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

/** The repository's root folder. */
export const REPO = fileURLToPath(new URL('../../../', import.meta.url));

export interface Healthcheck {
  test: string[];
  interval?: string;
  timeout?: string;
  retries?: number;
  start_period?: string;
}

/** The part of a compose service these tests read. */
export interface ComposeService {
  image?: string;
  build?: { context: string; dockerfile: string };
  command?: string[];
  entrypoint?: string[];
  environment?: Record<string, string>;
  ports?: string[];
  volumes?: string[];
  healthcheck?: Healthcheck;
  depends_on?: Record<string, { condition: string }>;
  restart?: string;
  profiles?: string[];
  deploy?: { replicas?: number };
  stop_grace_period?: string;
}

export interface ComposeFile {
  services: Record<string, ComposeService>;
  volumes?: Record<string, unknown>;
}

/** A `${VAR:?message}` (or `${VAR?message}`) whose variable is unset: compose refuses to start. */
export class MissingVariableError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`${variable}: ${message}`);
  }
}

/**
 * Compose's interpolation of one value: `$$` is a `$`; `${VAR}`, `${VAR:-default}` (unset or empty),
 * `${VAR-default}` (unset), `${VAR:?message}` and `${VAR?message}` (a {@link MissingVariableError}).
 */
export function interpolate(value: string, env: Record<string, string | undefined>): string {
  return value.replace(
    /\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?)([-?])([^}]*))?\}/g,
    (match, name: string | undefined, colon: string, kind: string, rest: string) => {
      if (match === '$$') return '$';
      const set = env[name as string];
      const missing = set === undefined || (colon === ':' && set === '');
      if (kind === '?' && missing) throw new MissingVariableError(name as string, rest);
      if (kind === '-' && missing) return rest;
      return set ?? '';
    },
  );
}

function interpolateAll(value: unknown, env: Record<string, string | undefined>): unknown {
  if (typeof value === 'string') return interpolate(value, env);
  if (Array.isArray(value)) return value.map((item) => interpolateAll(item, env));
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, interpolateAll(item, env)]));
  }
  return value;
}

/** docker-compose.yml's text. */
export function composeText(): string {
  return readFileSync(join(REPO, 'docker-compose.yml'), 'utf8');
}

/**
 * docker-compose.yml parsed (YAML merge keys and aliases resolved) and interpolated with `env` the way
 * `docker compose` does: after parsing, in values only (never in comments).
 */
export function loadCompose(env: Record<string, string | undefined>): ComposeFile {
  const raw = parse(composeText(), { merge: true }) as ComposeFile;
  return interpolateAll(raw, env) as ComposeFile;
}

/** The services `docker compose up` starts (no profile), or those of `profile` as well. */
export function servicesOf(compose: ComposeFile, profile?: string): [string, ComposeService][] {
  return Object.entries(compose.services).filter(
    ([, service]) => !service.profiles || (profile !== undefined && service.profiles.includes(profile)),
  );
}

/** What a service's Dockerfile builds: the workspace package `turbo prune` keeps, and its folder. */
export interface ImageSource {
  dockerfile: string;
  text: string;
  /** `@herald/gateway` */
  packageName: string;
  /** `apps/gateway` (absolute) */
  packageDir: string;
  /** The run stage's `CMD` (JSON form). */
  cmd: string[];
  entrypoint: string[] | undefined;
  exposed: number[];
}

export function imageSource(service: ComposeService): ImageSource {
  if (!service.build) throw new Error('the service has no build');
  const dockerfile = join(REPO, service.build.context, service.build.dockerfile);
  const text = readFileSync(dockerfile, 'utf8');
  const packageName = /turbo prune (@herald\/[a-z-]+) /.exec(text)?.[1];
  if (!packageName) throw new Error(`${dockerfile}: no turbo prune @herald/<app>`);
  const packageDir = join(REPO, 'apps', packageName.replace('@herald/', ''));
  if (!existsSync(join(packageDir, 'package.json'))) throw new Error(`${packageName}: no ${packageDir}`);
  const json = (directive: string) => {
    const line = text.split('\n').findLast((candidate) => candidate.startsWith(`${directive} `));
    return line ? (JSON.parse(line.slice(directive.length + 1)) as string[]) : undefined;
  };
  return {
    dockerfile,
    text,
    packageName,
    packageDir,
    cmd: json('CMD') ?? [],
    entrypoint: json('ENTRYPOINT'),
    exposed: [...text.matchAll(/^EXPOSE (\d+)$/gm)].map((match) => Number(match[1])),
  };
}

/** The `http://127.0.0.1:<port><path>` a healthcheck asks. */
export function healthcheckUrl(check: Healthcheck): URL | undefined {
  const found = /http:\/\/127\.0\.0\.1:\d+\/[A-Za-z0-9/_-]*/.exec(check.test.join(' '));
  return found ? new URL(found[0]) : undefined;
}

/** The file of this repository a service mounts at `target` (`./infra/nginx/herald.conf:/etc/…:ro`). */
export function composeVolumeSource(service: ComposeService, target: string): string | undefined {
  const volume = service.volumes?.find((entry) => entry.split(':')[1] === target);
  return volume ? join(REPO, volume.split(':')[0] as string) : undefined;
}
