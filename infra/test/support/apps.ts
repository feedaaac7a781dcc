import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { SHUTDOWN_GRACE_MS } from '@herald/config/serve';
import { EnvSchema as GatewayEnv, loadConfig as loadGateway } from '@herald/gateway/config';
import { loadConfig as loadRealtime, EnvSchema as RealtimeEnv } from '@herald/realtime/config';
import { loadConfig as loadWeb, EnvSchema as WebEnv } from '@herald/web/config';
import { loadConfig as loadWorker, EnvSchema as WorkerEnv } from '@herald/worker/config';
import { REPO } from './compose.js';

const names = (schema: { properties: Record<string, unknown> }) => Object.keys(schema.properties);

/**
 * Every variable each image's program reads: its env schema's properties (the one place an app reads
 * its environment). The CLI reads the gateway's and the worker's settings (`herald keys`, `herald failed`).
 */
export const APP_VARIABLES: Readonly<Record<string, readonly string[]>> = {
  '@herald/gateway': names(GatewayEnv),
  '@herald/worker': names(WorkerEnv),
  '@herald/realtime': names(RealtimeEnv),
  '@herald/web': names(WebEnv),
  '@herald/cli': [...new Set([...names(GatewayEnv), ...names(WorkerEnv)])],
};

/** Each app's own configuration reading: throws the `ConfigError` the app would exit with. */
export const APP_LOAD_CONFIG: Readonly<Record<string, (env: Record<string, string>) => unknown>> = {
  '@herald/gateway': (env) => loadGateway(env),
  '@herald/worker': (env) => loadWorker(env),
  '@herald/realtime': (env) => loadRealtime(env),
  '@herald/web': (env) => loadWeb(env),
};

/**
 * The variables of `env` without which `load` (one of {@link APP_LOAD_CONFIG}) refuses to start: each
 * left out in turn.
 */
export function requiredVariables(
  load: (env: Record<string, string>) => unknown,
  env: Record<string, string>,
): string[] {
  return Object.keys(env).filter((variable) => {
    const without = Object.fromEntries(Object.entries(env).filter(([key]) => key !== variable));
    try {
      load(without);
      return false;
    } catch {
      return true;
    }
  });
}

/** The port each app listens on when PORT is unset (its env schema's default). */
export const APP_DEFAULT_PORT: Readonly<Record<string, number>> = {
  '@herald/gateway': defaultPort(GatewayEnv),
  '@herald/worker': defaultPort(WorkerEnv),
  '@herald/realtime': defaultPort(RealtimeEnv),
  '@herald/web': defaultPort(WebEnv),
};

function defaultPort(schema: { properties: { PORT: unknown } }): number {
  return (schema.properties.PORT as { default: number }).default;
}

/** The operations endpoints every app serves (`@herald/config` operations, the gateway's and web's routes). */
export const HEALTH_PATHS = { liveness: '/healthz', readiness: '/readyz', metrics: '/metrics' } as const;

/** How long an app may take to exit after SIGTERM (close-with-grace's delay in `@herald/config`). */
export const SHUTDOWN_MS = SHUTDOWN_GRACE_MS;

/** The path prefix the web pages send the gateway's API to (the dashboard's `API`). */
export function webApiPrefix(): string {
  const source = readFileSync(join(REPO, 'apps/web/src/dashboard/api.ts'), 'utf8');
  const found = /export const API = '([^']+)'/.exec(source)?.[1];
  if (!found) throw new Error('apps/web/src/dashboard/api.ts: no API constant');
  return found;
}
