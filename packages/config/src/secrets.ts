import { DEV_JWT_SECRET } from '@herald/protocol';

/**
 * API key the gateway accepts when `HERALD_API_KEYS` is unset in development mode
 * (`HERALD_DEV_MODE=true`). Refused in production, like {@link DEV_JWT_SECRET}.
 */
export const DEV_API_KEY = 'dev-key';

/**
 * Operator (admin) key the gateway accepts when `HERALD_ADMIN_KEY` is unset in development mode. Refused
 * in production, like {@link DEV_API_KEY}.
 */
export const DEV_ADMIN_KEY = 'dev-admin-key';

/** Shortest accepted secret (`HERALD_JWT_SECRET`, `HERALD_ADMIN_KEY`, each key of `HERALD_API_KEYS`), in UTF-8 bytes. */
export const MIN_SECRET_BYTES = 32;

/**
 * Why `value` cannot be a secret, or undefined when it can: shorter than {@link MIN_SECRET_BYTES}
 * UTF-8 bytes, or one character repeated.
 *
 * @example
 * ```ts
 * weakSecret('HERALD_JWT_SECRET', 'x'.repeat(40)); // 'HERALD_JWT_SECRET is one character repeated: …'
 * ```
 */
export function weakSecret(name: string, value: string): string | undefined {
  const fix = 'use 32+ random bytes, e.g. `openssl rand -base64 32`';
  if (Buffer.byteLength(value, 'utf8') < MIN_SECRET_BYTES) {
    return `${name} is shorter than ${MIN_SECRET_BYTES} bytes: ${fix}`;
  }
  if (new Set(value).size === 1) return `${name} is one character repeated: ${fix}`;
  return undefined;
}

/** The secrets of an app, resolved by {@link resolveSecrets}. */
export interface SecretSettings {
  devMode: boolean;
  jwtSecret: string;
  /** True when the development secret is in use (development mode only). */
  usingDevJwtSecret: boolean;
  /** Keys from `HERALD_API_KEYS` (`none`: none, only keys stored in Redis); only when asked for. */
  apiKeys: readonly string[];
  /** True when `dev-key` is accepted (development mode only). */
  usingDevApiKey: boolean;
  /**
   * `HERALD_ADMIN_KEY`, the operator's key for the admin API (only when asked for): undefined when unset
   * in production (the admin API is then off).
   */
  adminKey: string | undefined;
  /** True when `dev-admin-key` is accepted (development mode only). */
  usingDevAdminKey: boolean;
  /** Problems for {@link readEnv}: missing or weak secrets, development values in production. */
  problems: string[];
  /** Loud warnings for the app to log at start-up in development mode. */
  warnings: string[];
}

const DEV_MODE_HINT = 'or set HERALD_DEV_MODE=true on a development machine';

/**
 * Checks `HERALD_JWT_SECRET` (and, with `apiKeys`, `HERALD_API_KEYS`; with `adminKey`,
 * `HERALD_ADMIN_KEY`) of a raw environment.
 *
 * Production (`HERALD_DEV_MODE` unset or `false`) needs both set, to values of 32+ bytes that are not
 * one repeated character; the development values (`dev-key`, {@link DEV_JWT_SECRET}) are refused.
 * Development mode (`HERALD_DEV_MODE=true`) uses the development values when unset and accepts them
 * when set, with a warning each; any other value set explicitly must still be strong. The development
 * values themselves are exempt from the strength rule, in development mode only. `HERALD_ADMIN_KEY` is
 * optional: unset in production, the admin API is off; it must be strong and none of the API keys.
 *
 * @example
 * ```ts
 * const secrets = resolveSecrets(env, { apiKeys: true });
 * const { values } = readEnv('gateway', EnvSchema, env, secrets.problems);
 * ```
 */
export function resolveSecrets(
  env: Readonly<Record<string, string | undefined>>,
  options: { apiKeys: boolean; adminKey?: boolean },
): SecretSettings {
  const devMode = (env.HERALD_DEV_MODE ?? '') === 'true';
  const problems: string[] = [];
  const warnings: string[] = [];
  const setting = (name: string) => (env[name] === '' ? undefined : env[name]);

  const secret = setting('HERALD_JWT_SECRET');
  let jwtSecret = secret ?? DEV_JWT_SECRET;
  const usingDevJwtSecret = jwtSecret === DEV_JWT_SECRET;
  if (secret === undefined && !devMode) {
    problems.push(
      `HERALD_JWT_SECRET is not set: set it to 32+ random bytes (e.g. \`openssl rand -base64 32\`), the same on the gateway and every realtime server, ${DEV_MODE_HINT}`,
    );
    jwtSecret = '';
  } else if (usingDevJwtSecret) {
    if (devMode)
      warnings.push('HERALD_JWT_SECRET: using the public development secret; anyone can forge user tokens');
    else problems.push(`HERALD_JWT_SECRET is the public development secret: set your own, ${DEV_MODE_HINT}`);
  } else {
    const weak = weakSecret('HERALD_JWT_SECRET', jwtSecret);
    if (weak) problems.push(weak);
  }

  let apiKeys: string[] = [];
  let usingDevApiKey = false;
  if (options.apiKeys) {
    const raw = setting('HERALD_API_KEYS');
    if (raw === undefined && !devMode) {
      problems.push(
        `HERALD_API_KEYS is not set: set it to your API keys (comma-separated, each 32+ random bytes, e.g. \`openssl rand -hex 32\`), or to \`none\` and create keys with \`herald keys create\`, ${DEV_MODE_HINT}`,
      );
    } else if (raw !== 'none') {
      apiKeys =
        raw === undefined
          ? [DEV_API_KEY]
          : raw
              .split(',')
              .map((key) => key.trim())
              .filter((key) => key.length > 0);
      if (raw !== undefined && apiKeys.length === 0) {
        problems.push(
          'HERALD_API_KEYS lists no key: set keys, or `none` to accept only keys stored in Redis',
        );
      }
      apiKeys.forEach((key, index) => {
        const name = `HERALD_API_KEYS key #${index + 1}`;
        if (key === DEV_API_KEY) {
          usingDevApiKey = true;
          if (!devMode) {
            problems.push(
              `${name} is the public development key "${DEV_API_KEY}", accepted only with HERALD_DEV_MODE=true: set your own keys`,
            );
          }
        } else {
          const weak = weakSecret(name, key);
          if (weak) problems.push(weak);
        }
      });
      if (usingDevApiKey && devMode) {
        warnings.push(
          `HERALD_API_KEYS: accepting the public development key "${DEV_API_KEY}"; anyone can send notifications and mint tokens`,
        );
      }
    }
  }
  const admin = options.adminKey
    ? resolveAdminKey(setting('HERALD_ADMIN_KEY'), devMode, apiKeys, problems, warnings)
    : undefined;
  if (devMode) {
    warnings.unshift(
      'DEVELOPMENT MODE (HERALD_DEV_MODE=true): development secrets are accepted; never expose this instance. Unset HERALD_DEV_MODE in production.',
    );
  }
  return {
    devMode,
    jwtSecret,
    usingDevJwtSecret: devMode && usingDevJwtSecret,
    apiKeys: Object.freeze(apiKeys),
    usingDevApiKey: devMode && usingDevApiKey,
    adminKey: admin,
    usingDevAdminKey: devMode && admin === DEV_ADMIN_KEY,
    problems,
    warnings,
  };
}

/** `HERALD_ADMIN_KEY` (`raw`), checked: problems and warnings are pushed to the caller's lists. */
function resolveAdminKey(
  raw: string | undefined,
  devMode: boolean,
  apiKeys: readonly string[],
  problems: string[],
  warnings: string[],
): string | undefined {
  if (raw === undefined && !devMode) return undefined;
  const key = raw ?? DEV_ADMIN_KEY;
  if (key === DEV_ADMIN_KEY) {
    if (devMode) {
      warnings.push(
        `HERALD_ADMIN_KEY: accepting the public development admin key "${DEV_ADMIN_KEY}"; anyone can read the operator dashboard and retry failed notifications`,
      );
    } else {
      problems.push(
        `HERALD_ADMIN_KEY is the public development admin key "${DEV_ADMIN_KEY}": set your own (32+ random bytes), or leave it unset to turn the admin API off, ${DEV_MODE_HINT}`,
      );
    }
    return key;
  }
  const weak = weakSecret('HERALD_ADMIN_KEY', key);
  if (weak) problems.push(weak);
  if (apiKeys.includes(key)) {
    problems.push(
      "HERALD_ADMIN_KEY is also one of HERALD_API_KEYS: the admin key is the operator's, never a tenant's; give it a value of its own",
    );
  }
  return key;
}
