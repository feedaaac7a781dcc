import { readFileSync } from 'node:fs';
import { DEV_JWT_SECRET } from '@herald/protocol';
import Type from 'typebox';
import { afterEach, describe, expect, it } from 'vitest';
import {
  ConfigError,
  DEV_API_KEY,
  DevModeEnv,
  HERALD_VARIABLES,
  MIN_SECRET_BYTES,
  readEnv,
  resolveSecrets,
  weakSecret,
  withoutPassword,
} from './env.js';

const Schema = Type.Object({
  PORT: Type.Integer({ minimum: 0, maximum: 65535, default: 3000 }),
  HERALD_RATE_LIMIT_PER_SECOND: Type.Number({ exclusiveMinimum: 0, default: 10 }),
  HERALD_QUEUE_NAME: Type.String({ minLength: 1, default: 'notifications' }),
  HERALD_DURABILITY: Type.Union([Type.Literal('redis'), Type.Literal('aof')], { default: 'redis' }),
  HERALD_JWT_SECRET: Type.Optional(Type.String({ minLength: 100 })),
  ...DevModeEnv,
});

const STRONG = 'k7Qp2vX9mB4nR8sT1wY6zA3cD5fG0hJq';
const OTHER_STRONG = 'Zx8Cv7Bn6Mq5Wk4Er3Ty2Ui1Op0AsDfG';

function problems(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).code).toBe('HERALD_ERR_CONFIG');
    return (error as Error).message;
  }
  throw new Error('expected a ConfigError');
}

describe('readEnv', () => {
  const saved = { ...process.env };
  afterEach(() => {
    process.env = { ...saved };
  });

  it('uses the defaults when a variable is unset or empty (empty counts as unset)', () => {
    expect(readEnv('test', Schema, {}).values).toMatchObject({
      PORT: 3000,
      HERALD_QUEUE_NAME: 'notifications',
    });
    expect(readEnv('test', Schema, { PORT: '', HERALD_QUEUE_NAME: '' }).values).toMatchObject({
      PORT: 3000,
      HERALD_QUEUE_NAME: 'notifications',
    });
  });

  it('reads only the env it is given, never process.env (env-schema merges it in by default)', () => {
    process.env.HERALD_QUEUE_NAME = 'from-process-env';
    process.env.PORT = 'not a port';
    // What docker compose writes for an unset `${VAR:-}`: an empty value, which must not be validated.
    process.env.HERALD_JWT_SECRET = '';
    const { values } = readEnv('test', Schema, { HERALD_JWT_SECRET: '' });
    expect(values.HERALD_QUEUE_NAME).toBe('notifications');
    expect(values.PORT).toBe(3000);
    expect(values.HERALD_JWT_SECRET).toBeUndefined();
  });

  it('converts numbers and booleans', () => {
    const { values } = readEnv('test', Schema, {
      PORT: '8080',
      HERALD_RATE_LIMIT_PER_SECOND: '0.5',
      HERALD_DEV_MODE: 'true',
    });
    expect(values).toMatchObject({ PORT: 8080, HERALD_RATE_LIMIT_PER_SECOND: 0.5, HERALD_DEV_MODE: true });
  });

  it.each(['Infinity', '-Infinity', '1e999', 'NaN', '0x10', 'abc', '1_000', ' '])(
    'refuses the number %j',
    (value) => {
      const message = problems(() => readEnv('test', Schema, { HERALD_RATE_LIMIT_PER_SECOND: value }));
      expect(message).toContain('HERALD_RATE_LIMIT_PER_SECOND must be a finite decimal number');
    },
  );

  it('names every problem in one error, with the values (never a secret)', () => {
    const message = problems(() =>
      readEnv('test', Schema, {
        PORT: '70000',
        HERALD_DURABILITY: 'disk',
        HERALD_DEV_MODE: 'yes',
        HERALD_JWT_SECRET: 'the-secret-value',
      }),
    );
    expect(message).toMatch(/^Invalid test configuration \(4 problems\)/);
    expect(message).toContain('PORT must be <= 65535 (got "70000")');
    expect(message).toContain('HERALD_DURABILITY must be one of: redis, aof (got "disk")');
    expect(message).toContain('HERALD_DEV_MODE must be boolean (got "yes")');
    expect(message).toContain('HERALD_JWT_SECRET must NOT have fewer than 100 characters (value not shown)');
    expect(message).not.toContain('the-secret-value');
  });

  it('warns about a HERALD_* variable no app reads, suggesting the near miss; ignores other apps’ and non-Herald ones', () => {
    const { warnings } = readEnv('test', Schema, {
      HERALD_QUEUE_NAMES: 'x',
      HERALD_SOMETHING_ELSE_ENTIRELY: 'y',
      HERALD_API_KEYS: 'read by the gateway, not by this app',
      PATH: '/usr/bin',
    });
    expect(warnings).toEqual([
      'HERALD_QUEUE_NAMES is not a Herald setting and is ignored: did you mean HERALD_QUEUE_NAME?',
      'HERALD_SOMETHING_ELSE_ENTIRELY is not a Herald setting and is ignored',
    ]);
  });

  it('adds the unknown variables to a refusal, so that a typo of a required secret is explained', () => {
    const message = problems(() =>
      readEnv('test', Schema, { HERALD_JWT_SECRETT: 'x' }, ['HERALD_JWT_SECRET is not set']),
    );
    expect(message).toContain('HERALD_JWT_SECRET is not set');
    expect(message).toContain(
      'HERALD_JWT_SECRETT is not a Herald setting and is ignored: did you mean HERALD_JWT_SECRET?',
    );
  });
});

describe('weakSecret', () => {
  it(`refuses fewer than ${MIN_SECRET_BYTES} bytes and one repeated character`, () => {
    expect(weakSecret('S', STRONG)).toBeUndefined();
    expect(weakSecret('S', STRONG.slice(1))).toMatch(/shorter than 32 bytes/);
    expect(weakSecret('S', 'a'.repeat(64))).toMatch(/one character repeated/);
    // Bytes, not characters: 11 three-byte characters are 33 bytes.
    expect(weakSecret('S', '€ü€ü€ü€ü€ü€ü€ü€ü€ü€ü€')).toBeUndefined();
  });
});

describe('resolveSecrets', () => {
  it('production (no HERALD_DEV_MODE): refuses to start without secrets, saying exactly what to set', () => {
    const secrets = resolveSecrets({}, { apiKeys: true });
    expect(secrets.devMode).toBe(false);
    expect(secrets.problems).toHaveLength(2);
    expect(secrets.problems[0]).toMatch(/^HERALD_JWT_SECRET is not set: set it to 32\+ random bytes/);
    expect(secrets.problems[1]).toMatch(
      /^HERALD_API_KEYS is not set: .*or to `none` and create keys with `herald keys create`/,
    );
    expect(
      resolveSecrets({ HERALD_JWT_SECRET: '', HERALD_API_KEYS: '' }, { apiKeys: true }).problems,
    ).toHaveLength(2);
  });

  it('production: refuses the development values even when set explicitly', () => {
    const secrets = resolveSecrets(
      {
        HERALD_JWT_SECRET: DEV_JWT_SECRET,
        HERALD_API_KEYS: `${STRONG},${DEV_API_KEY}`,
        HERALD_DEV_MODE: 'false',
      },
      { apiKeys: true },
    );
    expect(secrets.problems).toEqual([
      expect.stringMatching(/^HERALD_JWT_SECRET is the public development secret/),
      expect.stringMatching(/^HERALD_API_KEYS key #2 is the public development key "dev-key"/),
    ]);
  });

  it('production: accepts strong secrets and `none`', () => {
    const secrets = resolveSecrets(
      { HERALD_JWT_SECRET: STRONG, HERALD_API_KEYS: ` ${STRONG} , ${OTHER_STRONG} ` },
      { apiKeys: true },
    );
    expect(secrets).toMatchObject({
      problems: [],
      warnings: [],
      jwtSecret: STRONG,
      apiKeys: [STRONG, OTHER_STRONG],
    });
    expect(
      resolveSecrets({ HERALD_JWT_SECRET: STRONG, HERALD_API_KEYS: 'none' }, { apiKeys: true }),
    ).toMatchObject({
      problems: [],
      apiKeys: [],
      usingDevApiKey: false,
    });
  });

  it('refuses weak secrets, in development mode too', () => {
    for (const devMode of ['true', 'false']) {
      const secrets = resolveSecrets(
        {
          HERALD_DEV_MODE: devMode,
          HERALD_JWT_SECRET: 'short',
          HERALD_API_KEYS: `${STRONG},${'x'.repeat(40)}`,
        },
        { apiKeys: true },
      );
      expect(secrets.problems).toEqual([
        expect.stringMatching(/^HERALD_JWT_SECRET is shorter than 32 bytes/),
        expect.stringMatching(/^HERALD_API_KEYS key #2 is one character repeated/),
      ]);
    }
    expect(
      resolveSecrets({ HERALD_JWT_SECRET: STRONG, HERALD_API_KEYS: ',' }, { apiKeys: true }).problems,
    ).toEqual([expect.stringMatching(/^HERALD_API_KEYS lists no key/)]);
  });

  it('development mode: the development values, set or defaulted, with loud warnings', () => {
    const secrets = resolveSecrets({ HERALD_DEV_MODE: 'true' }, { apiKeys: true });
    expect(secrets).toMatchObject({
      problems: [],
      devMode: true,
      jwtSecret: DEV_JWT_SECRET,
      usingDevJwtSecret: true,
      apiKeys: [DEV_API_KEY],
      usingDevApiKey: true,
    });
    expect(secrets.warnings[0]).toMatch(/^DEVELOPMENT MODE \(HERALD_DEV_MODE=true\)/);
    expect(secrets.warnings).toHaveLength(3);
    const explicit = resolveSecrets(
      {
        HERALD_DEV_MODE: 'true',
        HERALD_JWT_SECRET: DEV_JWT_SECRET,
        HERALD_API_KEYS: `${DEV_API_KEY},${STRONG}`,
      },
      { apiKeys: true },
    );
    expect(explicit).toMatchObject({ problems: [], apiKeys: [DEV_API_KEY, STRONG], usingDevApiKey: true });
  });

  it('development mode with real secrets: only the development-mode warning', () => {
    const secrets = resolveSecrets(
      { HERALD_DEV_MODE: 'true', HERALD_JWT_SECRET: STRONG },
      { apiKeys: false },
    );
    expect(secrets).toMatchObject({ problems: [], usingDevJwtSecret: false, apiKeys: [] });
    expect(secrets.warnings).toHaveLength(1);
  });

  it('without apiKeys (realtime) ignores HERALD_API_KEYS', () => {
    expect(resolveSecrets({ HERALD_JWT_SECRET: STRONG }, { apiKeys: false }).problems).toEqual([]);
  });
});

describe('withoutPassword', () => {
  it('hides the password of a Redis URL, and leaves a URL without one alone', () => {
    expect(withoutPassword('redis://:s3cret@redis:6379')).toBe('redis://:***@redis:6379');
    expect(withoutPassword('rediss://user:s3cret@redis:6380/1')).toBe('rediss://user:***@redis:6380/1');
    expect(withoutPassword('redis://127.0.0.1:6379')).toBe('redis://127.0.0.1:6379');
  });
});

describe('the README', () => {
  const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');
  const table = readme.slice(readme.indexOf('## Configuration'), readme.indexOf('## Running it'));

  it.each(HERALD_VARIABLES)('lists %s in its configuration table', (name) => {
    expect(table).toContain(`\`${name}\``);
  });
});
