import { readFileSync } from 'node:fs';
import Type from 'typebox';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError, DevModeEnv, HERALD_VARIABLES, readEnv, withoutPassword } from './env.js';

const Schema = Type.Object({
  PORT: Type.Integer({ minimum: 0, maximum: 65535, default: 3000 }),
  HERALD_RATE_LIMIT_PER_SECOND: Type.Number({ exclusiveMinimum: 0, default: 10 }),
  HERALD_QUEUE_NAME: Type.String({ minLength: 1, default: 'notifications' }),
  HERALD_DURABILITY: Type.Union([Type.Literal('redis'), Type.Literal('aof')], { default: 'redis' }),
  HERALD_JWT_SECRET: Type.Optional(Type.String({ minLength: 100 })),
  ...DevModeEnv,
});

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
    // The count is of the problems; the warning is told apart from them, not counted as one.
    expect(message).toBe(
      [
        'Invalid test configuration (1 problem):',
        '  - HERALD_JWT_SECRET is not set',
        'and 1 warning:',
        '  - HERALD_JWT_SECRETT is not a Herald setting and is ignored: did you mean HERALD_JWT_SECRET?',
      ].join('\n'),
    );
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
