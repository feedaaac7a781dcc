import { createECDH } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DEV_VAPID_KEYS, resolvePush } from './settings.js';

/** A key pair whose private key is a full 32 bytes (1 in 256 is 31 bytes; the test below covers those). */
function pair(): { publicKey: string; privateKey: string } {
  let ecdh = createECDH('prime256v1');
  do {
    ecdh = createECDH('prime256v1');
    ecdh.generateKeys();
  } while (ecdh.getPrivateKey().length !== 32);
  return { publicKey: ecdh.getPublicKey('base64url'), privateKey: ecdh.getPrivateKey('base64url') };
}

const keys = pair();
const full = {
  HERALD_VAPID_PUBLIC_KEY: keys.publicKey,
  HERALD_VAPID_PRIVATE_KEY: keys.privateKey,
  HERALD_VAPID_SUBJECT: 'mailto:ops@example.com',
};

describe('resolvePush (HERALD_VAPID_*)', () => {
  it('production without keys: push off, and said so', () => {
    const push = resolvePush({}, { sender: true });
    expect(push).toMatchObject({ enabled: false, publicKey: undefined, vapid: undefined, problems: [] });
    expect(push.warnings[0]).toContain('Web Push is off: set HERALD_VAPID_PUBLIC_KEY');
  });

  it('development mode without keys: the development pair, loudly', () => {
    const push = resolvePush({ HERALD_DEV_MODE: 'true' }, { sender: true });
    expect(push).toMatchObject({ enabled: true, publicKey: DEV_VAPID_KEYS.publicKey, allowPrivate: true });
    expect(push.vapid).toEqual(DEV_VAPID_KEYS);
    expect(push.warnings[0]).toContain('development VAPID key pair');
  });

  it('the development pair set by hand: refused in production (its private key is public), a warning in development mode', () => {
    const pair = {
      HERALD_VAPID_PUBLIC_KEY: DEV_VAPID_KEYS.publicKey,
      HERALD_VAPID_PRIVATE_KEY: DEV_VAPID_KEYS.privateKey,
      HERALD_VAPID_SUBJECT: DEV_VAPID_KEYS.subject,
    };
    for (const sender of [true, false]) {
      const push = resolvePush(pair, { sender });
      expect(push.enabled, `sender ${sender}`).toBe(false);
      expect(push.problems, `sender ${sender}`).toEqual([
        expect.stringMatching(
          /^HERALD_VAPID_PUBLIC_KEY is the public development key pair: .*npx web-push generate-vapid-keys.*HERALD_DEV_MODE=true/,
        ),
      ]);
    }
    const dev = resolvePush({ ...pair, HERALD_DEV_MODE: 'true' }, { sender: true });
    expect(dev).toMatchObject({ enabled: true, problems: [] });
    expect(dev.warnings[0]).toContain('development VAPID key pair');
  });

  it('a real pair and subject: on; the gateway and realtime need only the public key', () => {
    expect(resolvePush(full, { sender: true })).toMatchObject({
      enabled: true,
      vapid: { ...keys, subject: 'mailto:ops@example.com' },
      allowPrivate: false,
      problems: [],
    });
    const reader = resolvePush({ HERALD_VAPID_PUBLIC_KEY: keys.publicKey }, { sender: false });
    expect(reader).toMatchObject({ enabled: true, publicKey: keys.publicKey, vapid: undefined });
    expect(
      resolvePush({ ...full, HERALD_VAPID_SUBJECT: 'https://example.com/ops' }, { sender: true }).enabled,
    ).toBe(true);
  });

  it("a private key whose first byte is zero, as Node's ecdh.getPrivateKey() exports it (31 bytes): accepted, padded to 32 for web-push", () => {
    let ecdh = createECDH('prime256v1');
    do {
      ecdh = createECDH('prime256v1');
      ecdh.generateKeys();
    } while (ecdh.getPrivateKey().length === 32);
    const publicKey = ecdh.getPublicKey('base64url');
    const push = resolvePush(
      {
        ...full,
        HERALD_VAPID_PUBLIC_KEY: publicKey,
        HERALD_VAPID_PRIVATE_KEY: ecdh.getPrivateKey('base64url'),
      },
      { sender: true },
    );
    expect(push.problems).toEqual([]);
    const padded = Buffer.from(push.vapid?.privateKey ?? '', 'base64url');
    expect(padded.length).toBe(32);
    expect(padded.subarray(32 - ecdh.getPrivateKey().length).equals(ecdh.getPrivateKey())).toBe(true);
  });

  it('partly set: refused, naming what is missing', () => {
    const push = resolvePush({ HERALD_VAPID_PUBLIC_KEY: keys.publicKey }, { sender: true });
    expect(push.enabled).toBe(false);
    expect(push.problems).toEqual([
      'HERALD_VAPID_PRIVATE_KEY and HERALD_VAPID_SUBJECT must be set with HERALD_VAPID_PUBLIC_KEY (Web Push needs them all)',
    ]);
  });

  it('bad keys and subjects: each named by its variable', () => {
    const problems = (env: Record<string, string>) =>
      resolvePush({ ...full, ...env }, { sender: true }).problems;
    expect(problems({ HERALD_VAPID_PUBLIC_KEY: 'not-a-key' })[0]).toMatch(
      /^HERALD_VAPID_PUBLIC_KEY is not a P-256 public key/,
    );
    // 65 bytes starting 0x04, but not a point of the curve.
    const offCurve = Buffer.concat([Buffer.from([4]), Buffer.alloc(64, 1)]).toString('base64url');
    expect(problems({ HERALD_VAPID_PUBLIC_KEY: offCurve })[0]).toMatch(
      /^HERALD_VAPID_PUBLIC_KEY is not a point of the P-256 curve/,
    );
    expect(problems({ HERALD_VAPID_PRIVATE_KEY: 'c2hvcnQ' })[0]).toMatch(
      /^HERALD_VAPID_PRIVATE_KEY is not a P-256 private key/,
    );
    expect(problems({ HERALD_VAPID_PRIVATE_KEY: pair().privateKey })).toEqual([
      'HERALD_VAPID_PRIVATE_KEY is not the private key of HERALD_VAPID_PUBLIC_KEY: set the two of one pair',
    ]);
    expect(problems({ HERALD_VAPID_SUBJECT: 'ops@example.com' })[0]).toMatch(
      /^HERALD_VAPID_SUBJECT must be a mailto: or https: URL/,
    );
    expect(problems({ HERALD_VAPID_SUBJECT: 'http://example.com' })[0]).toMatch(/^HERALD_VAPID_SUBJECT/);
  });

  it('HERALD_PUSH_ALLOW_PRIVATE allows private endpoints', () => {
    expect(resolvePush({ ...full, HERALD_PUSH_ALLOW_PRIVATE: 'true' }, { sender: true }).allowPrivate).toBe(
      true,
    );
  });
});
