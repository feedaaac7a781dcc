import { DEV_JWT_SECRET } from '@herald/protocol';
import { describe, expect, it } from 'vitest';
import { DEV_ADMIN_KEY, DEV_API_KEY, MIN_SECRET_BYTES, resolveSecrets, weakSecret } from './secrets.js';

const STRONG = 'k7Qp2vX9mB4nR8sT1wY6zA3cD5fG0hJq';
const OTHER_STRONG = 'Zx8Cv7Bn6Mq5Wk4Er3Ty2Ui1Op0AsDfG';
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

describe('resolveSecrets: HERALD_ADMIN_KEY (the gateway, adminKey: true)', () => {
  const production = { HERALD_JWT_SECRET: STRONG, HERALD_API_KEYS: STRONG };

  it('production: unset turns the admin API off (no problem, no key); a strong key is accepted', () => {
    expect(resolveSecrets(production, { apiKeys: true, adminKey: true })).toMatchObject({
      problems: [],
      adminKey: undefined,
      usingDevAdminKey: false,
    });
    expect(
      resolveSecrets({ ...production, HERALD_ADMIN_KEY: OTHER_STRONG }, { apiKeys: true, adminKey: true }),
    ).toMatchObject({ problems: [], adminKey: OTHER_STRONG, usingDevAdminKey: false });
  });

  it('production: refuses the development admin key, a weak key, and a key that is also an API key', () => {
    const problemsOf = (key: string) =>
      resolveSecrets({ ...production, HERALD_ADMIN_KEY: key }, { apiKeys: true, adminKey: true }).problems;
    expect(problemsOf(DEV_ADMIN_KEY)).toEqual([
      expect.stringMatching(/^HERALD_ADMIN_KEY is the public development admin key "dev-admin-key"/),
    ]);
    expect(problemsOf('short')).toEqual([
      expect.stringMatching(/^HERALD_ADMIN_KEY is shorter than 32 bytes/),
    ]);
    expect(problemsOf(STRONG)).toEqual([
      expect.stringMatching(/^HERALD_ADMIN_KEY is also one of HERALD_API_KEYS/),
    ]);
  });

  it('development mode: the development admin key when unset, with a warning; a weak one is still refused', () => {
    const secrets = resolveSecrets({ HERALD_DEV_MODE: 'true' }, { apiKeys: true, adminKey: true });
    expect(secrets).toMatchObject({ problems: [], adminKey: DEV_ADMIN_KEY, usingDevAdminKey: true });
    expect(secrets.warnings).toContainEqual(
      expect.stringMatching(/^HERALD_ADMIN_KEY: accepting the public development admin key/),
    );
    expect(
      resolveSecrets(
        { HERALD_DEV_MODE: 'true', HERALD_ADMIN_KEY: 'short' },
        { apiKeys: true, adminKey: true },
      ).problems,
    ).toEqual([expect.stringMatching(/^HERALD_ADMIN_KEY is shorter than 32 bytes/)]);
  });

  it('is not looked at without adminKey (realtime)', () => {
    expect(
      resolveSecrets({ HERALD_JWT_SECRET: STRONG, HERALD_ADMIN_KEY: 'short' }, { apiKeys: false }),
    ).toMatchObject({ problems: [], adminKey: undefined });
  });
});
