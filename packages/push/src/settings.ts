import { createECDH, createPublicKey } from 'node:crypto';
import Type from 'typebox';

/**
 * A development VAPID key pair, used by every app when `HERALD_DEV_MODE=true` and no VAPID key is set, so
 * that the one-terminal stack has Web Push out of the box. Public (it is in this file): refused in
 * production like the other development secrets.
 */
export const DEV_VAPID_KEYS = Object.freeze({
  publicKey: 'BMxEwgmCLHSPwC6_Bew8rgUFBz2qWLWU2Rd11955dkQ5q_1g0Hc9SiyFL1yBJPkx_iFyBUavoIz5WHPLEo7r1u4',
  privateKey: 'Uqm1UF9_GwfTbDquKrNtHIlMtdU0tNr7V5UK8PaR-LI',
  subject: 'mailto:herald-dev@example.com',
});

/**
 * The Web Push variable of the gateway (which only needs to know whether push is on), as TypeBox
 * properties to spread into an app's env schema; the values are checked by {@link resolvePush}, which
 * reads them first (like `resolveSecrets`).
 */
export const PushKeyEnv = {
  HERALD_VAPID_PUBLIC_KEY: Type.Optional(Type.String()),
};

/** {@link PushKeyEnv} and whether endpoints may be private addresses: realtime's (it checks registrations). */
export const PushEnv = {
  ...PushKeyEnv,
  HERALD_PUSH_ALLOW_PRIVATE: Type.Boolean({ default: false }),
};

/** {@link PushEnv} and the worker's own: the private key and the subject that sign each push (VAPID). */
export const PushSenderEnv = {
  ...PushEnv,
  HERALD_VAPID_PRIVATE_KEY: Type.Optional(Type.String()),
  HERALD_VAPID_SUBJECT: Type.Optional(Type.String()),
  HERALD_PUSH_TIMEOUT_MS: Type.Integer({ minimum: 100, maximum: 60_000, default: 10_000 }),
};

/** The VAPID identity that signs pushes (RFC 8292): the worker's. */
export interface VapidKeys {
  publicKey: string;
  privateKey: string;
  subject: string;
}

/** Web Push settings of an app, from {@link resolvePush}. */
export interface PushSettings {
  /** False: push is off (no VAPID key in production); `escalateAfterMs` and `push-*` answer 422. */
  enabled: boolean;
  /** The VAPID public key (base64url) the SDK subscribes with; undefined when off. */
  publicKey: string | undefined;
  /** With `sender: true` and push on: the whole key pair and subject. */
  vapid: VapidKeys | undefined;
  /** Endpoints on loopback or private addresses allowed (`HERALD_PUSH_ALLOW_PRIVATE` or development mode). */
  allowPrivate: boolean;
  /** Problems for `readEnv` (each names its variable). */
  problems: string[];
  /** For the app to log at start-up: push off, or on with the development keys. */
  warnings: string[];
}

const TRUE = /^(true|1)$/i;

/**
 * Reads and checks the VAPID settings from `env`: the public key must be an uncompressed P-256 point
 * (65 bytes, base64url), the private key 32 bytes whose public key is that one, the subject a `mailto:`
 * or `https:` URL. The worker (`sender: true`) needs all three, the gateway and realtime the public key.
 * None set: push is off in production (said in `warnings`), on with {@link DEV_VAPID_KEYS} in development
 * mode. Some set but not all: a problem naming what is missing (secure by default, never half on).
 *
 * @example
 * ```ts
 * const push = resolvePush(env, { sender: true });
 * const { values } = readEnv('worker', EnvSchema, env, push.problems);
 * ```
 */
export function resolvePush(
  env: Readonly<Record<string, string | undefined>>,
  options: { sender: boolean },
): PushSettings {
  const devMode = TRUE.test(env.HERALD_DEV_MODE ?? '');
  const allowPrivate = TRUE.test(env.HERALD_PUSH_ALLOW_PRIVATE ?? '') || devMode;
  const names = options.sender
    ? (['HERALD_VAPID_PUBLIC_KEY', 'HERALD_VAPID_PRIVATE_KEY', 'HERALD_VAPID_SUBJECT'] as const)
    : (['HERALD_VAPID_PUBLIC_KEY'] as const);
  const given = names.filter((name) => (env[name] ?? '') !== '');
  const off = { enabled: false, publicKey: undefined, vapid: undefined, allowPrivate };
  if (given.length === 0) {
    if (devMode) {
      return {
        enabled: true,
        publicKey: DEV_VAPID_KEYS.publicKey,
        vapid: options.sender ? { ...DEV_VAPID_KEYS } : undefined,
        allowPrivate,
        problems: [],
        warnings: ['Web Push uses the development VAPID key pair (HERALD_DEV_MODE): never in production'],
      };
    }
    return {
      ...off,
      problems: [],
      warnings: [`Web Push is off: set ${names.join(', ')} to turn it on (escalateAfterMs answers 422)`],
    };
  }
  if (given.length < names.length) {
    const missing = names.filter((name) => !given.includes(name));
    return {
      ...off,
      problems: [
        `${missing.join(' and ')} must be set with ${given.join(' and ')} (Web Push needs them all)`,
      ],
      warnings: [],
    };
  }
  const publicKey = env.HERALD_VAPID_PUBLIC_KEY ?? '';
  // The development pair's private key is in this file: whoever sees a subscription could push to it.
  const development = publicKey === DEV_VAPID_KEYS.publicKey;
  if (development && !devMode) {
    return {
      ...off,
      problems: [
        `HERALD_VAPID_PUBLIC_KEY is the public development key pair: ${GENERATE} and set your own, or set HERALD_DEV_MODE=true on a development machine`,
      ],
      warnings: [],
    };
  }
  const problems = [publicKeyProblem(publicKey)];
  if (options.sender) {
    problems.push(
      privateKeyProblem(env.HERALD_VAPID_PRIVATE_KEY ?? '', publicKey),
      subjectProblem(env.HERALD_VAPID_SUBJECT ?? ''),
    );
  }
  const found = problems.filter((problem): problem is string => problem !== undefined);
  if (found.length > 0) return { ...off, problems: found, warnings: [] };
  return {
    enabled: true,
    publicKey,
    vapid: options.sender
      ? {
          publicKey,
          privateKey: privateKeyBytes(env.HERALD_VAPID_PRIVATE_KEY ?? '')?.toString('base64url') ?? '',
          subject: env.HERALD_VAPID_SUBJECT ?? '',
        }
      : undefined,
    allowPrivate,
    problems: [],
    warnings: development
      ? ['Web Push uses the development VAPID key pair (HERALD_DEV_MODE): never in production']
      : [],
  };
}

const GENERATE = 'make a pair with `npx web-push generate-vapid-keys`';

/** Bytes of base64url `text`, or undefined when it is not base64url. */
function base64url(text: string): Buffer | undefined {
  return /^[A-Za-z0-9_-]+={0,2}$/.test(text) ? Buffer.from(text, 'base64url') : undefined;
}

/**
 * What `push` adds to an app's `readServerEnv` (`@herald/config`): its problems, in the same
 * `ConfigError`, and the VAPID public key, which every app must share (the deployment fingerprint).
 *
 * @example
 * ```ts
 * const { server } = readServerEnv('worker', EnvSchema, env, undefined, serverEnvExtras(push));
 * ```
 */
export function serverEnvExtras(push: PushSettings): {
  problems: readonly string[];
  deployment: Readonly<Record<string, string>>;
} {
  return { problems: push.problems, deployment: { HERALD_VAPID_PUBLIC_KEY: push.publicKey ?? '' } };
}

/** Why `key` is not a P-256 public key (uncompressed point, base64url), or undefined. */
export function publicKeyProblem(key: string, name = 'HERALD_VAPID_PUBLIC_KEY'): string | undefined {
  const bytes = base64url(key);
  if (bytes?.length !== 65 || bytes[0] !== 4) {
    return `${name} is not a P-256 public key (65 bytes, uncompressed, base64url): ${GENERATE}`;
  }
  try {
    createPublicKey({
      format: 'jwk',
      key: {
        kty: 'EC',
        crv: 'P-256',
        x: bytes.subarray(1, 33).toString('base64url'),
        y: bytes.subarray(33).toString('base64url'),
      },
    });
    return undefined;
  } catch {
    return `${name} is not a point of the P-256 curve: ${GENERATE}`;
  }
}

/**
 * The private key as the 32 bytes web-push wants. Node's `ecdh.getPrivateKey()` drops the scalar's leading
 * zero bytes (one key in 256 comes out as 31 bytes), so a key of 30 or 31 bytes is the same key, padded.
 */
function privateKeyBytes(key: string): Buffer | undefined {
  const bytes = base64url(key);
  if (bytes === undefined || bytes.length < 30 || bytes.length > 32) return undefined;
  return Buffer.concat([Buffer.alloc(32 - bytes.length), bytes]);
}

function privateKeyProblem(key: string, publicKey: string): string | undefined {
  const bytes = privateKeyBytes(key);
  if (bytes === undefined) {
    return `HERALD_VAPID_PRIVATE_KEY is not a P-256 private key (32 bytes, base64url): ${GENERATE}`;
  }
  try {
    const ecdh = createECDH('prime256v1');
    ecdh.setPrivateKey(bytes);
    if (ecdh.getPublicKey().equals(base64url(publicKey) ?? Buffer.alloc(0))) return undefined;
  } catch {
    return `HERALD_VAPID_PRIVATE_KEY is not a valid P-256 private key: ${GENERATE}`;
  }
  return 'HERALD_VAPID_PRIVATE_KEY is not the private key of HERALD_VAPID_PUBLIC_KEY: set the two of one pair';
}

function subjectProblem(subject: string): string | undefined {
  if (/^mailto:[^@\s]+@[^@\s]+$/.test(subject)) return undefined;
  try {
    if (new URL(subject).protocol === 'https:') return undefined;
  } catch {}
  return `HERALD_VAPID_SUBJECT must be a mailto: or https: URL (how a push service reaches the operator), e.g. mailto:ops@example.com`;
}
