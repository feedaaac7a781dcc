import { fileURLToPath } from 'node:url';
import { DEV_API_KEY, DevModeEnv, LogEnv, type LogSettings, logSettings, readEnv } from '@herald/config';
import { USER_ID_MAX_LENGTH, USER_ID_PATTERN } from '@herald/protocol';
import Type from 'typebox';

export { ConfigError } from '@herald/config';

/** Every variable the web server reads (nothing else is looked at). */
export const EnvSchema = Type.Object({
  PORT: Type.Integer({ minimum: 0, maximum: 65535, default: 3003 }),
  HOST: Type.String({ minLength: 1, default: '0.0.0.0' }),
  ...DevModeEnv,
  HERALD_GATEWAY_URL: Type.String({ pattern: '^https?://', default: 'http://127.0.0.1:3000' }),
  HERALD_REALTIME_URL: Type.String({ pattern: '^https?://', default: 'http://127.0.0.1:3001' }),
  // Development only (HERALD_DEV_MODE=true): what the demo token route mints tokens with.
  HERALD_DEMO_API_KEY: Type.Optional(Type.String({ minLength: 1 })),
  HERALD_DEMO_USER: Type.String({
    pattern: USER_ID_PATTERN,
    maxLength: USER_ID_MAX_LENGTH,
    default: 'alice',
  }),
  ...LogEnv,
});

/** The web server's settings, parsed once at start-up and frozen. */
export interface WebConfig {
  port: number;
  host: string;
  /** `HERALD_DEV_MODE=true`: the demo token route `POST /dev/token` exists (never in production). */
  devMode: boolean;
  /** Where `/api/*` goes (the gateway, `/api` stripped). */
  gatewayUrl: string;
  /** Where `/socket.io/*` goes, WebSocket upgrades included (the realtime servers or their balancer). */
  realtimeUrl: string;
  /** Development mode only: the demo token route's API key and default user. */
  demo: { apiKey: string; userId: string } | undefined;
  /** The built pages (Vite's output). */
  publicDir: string;
  log: LogSettings;
  /** Start-up warnings to log: development mode, unknown `HERALD_*` variables. */
  warnings: readonly string[];
}

/** Whether `value` parses as an http(s) URL with a host (the proxy builds its requests from it). */
function upstreamUrl(value: string): boolean {
  try {
    return new URL(value).hostname !== '';
  } catch {
    return false;
  }
}

/** The built pages beside this file once compiled: `dist/server/config.js` → `dist/public`. */
const PUBLIC_DIR = fileURLToPath(new URL('../public', import.meta.url));

/**
 * Reads the web server's configuration from `env` (default `process.env`) and nothing else; every
 * problem is named in one `ConfigError`. `HERALD_DEMO_API_KEY` or `HERALD_DEMO_USER` outside development mode is
 * refused: the demo token route they set up mints a token for any user who asks, which production must never
 * offer, so either one there is a mistake to report, not a setting to ignore.
 */
export function loadConfig(
  env: Record<string, string | undefined> = process.env,
  options: { publicDir?: string } = {},
): WebConfig {
  const devMode = (env.HERALD_DEV_MODE ?? '') === 'true';
  const problems: string[] = [];
  for (const name of ['HERALD_DEMO_API_KEY', 'HERALD_DEMO_USER'] as const) {
    if (!devMode && env[name]) {
      problems.push(
        `${name} is set but HERALD_DEV_MODE is not true: the demo token route mints tokens for anyone and exists in development mode only; unset it in production`,
      );
    }
  }
  for (const name of ['HERALD_GATEWAY_URL', 'HERALD_REALTIME_URL'] as const) {
    const value = env[name];
    if (value !== undefined && /^https?:\/\//.test(value) && !upstreamUrl(value)) {
      problems.push(
        `${name} (${JSON.stringify(value)}) is not a URL with a host (and a port from 1 to 65535, if any): e.g. http://herald-gateway:3000`,
      );
    }
  }
  const { values, warnings } = readEnv('web', EnvSchema, env, problems);
  const devWarnings = devMode
    ? [
        'DEVELOPMENT MODE (HERALD_DEV_MODE=true): POST /dev/token mints a user token for anyone who asks; never expose this instance. Unset HERALD_DEV_MODE in production.',
      ]
    : [];
  return Object.freeze({
    port: values.PORT,
    host: values.HOST,
    devMode,
    gatewayUrl: values.HERALD_GATEWAY_URL.replace(/\/+$/, ''),
    realtimeUrl: values.HERALD_REALTIME_URL.replace(/\/+$/, ''),
    demo: devMode
      ? Object.freeze({ apiKey: values.HERALD_DEMO_API_KEY ?? DEV_API_KEY, userId: values.HERALD_DEMO_USER })
      : undefined,
    publicDir: options.publicDir ?? PUBLIC_DIR,
    log: logSettings(values),
    warnings: Object.freeze([...devWarnings, ...warnings]),
  });
}
