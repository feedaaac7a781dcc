import { SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import { signUserToken, TokenErrorCode, verifyUserToken } from './user-token.js';

const secret = 'test-secret-that-is-long-enough-000';

describe('user tokens', () => {
  it('round-trips the user id and expiry', async () => {
    const { token, expiresAt } = await signUserToken({
      userId: 'alice',
      tenantId: 'acme',
      keyId: 'k1',
      secret,
      ttlSeconds: 60,
    });
    const verified = await verifyUserToken(token, secret);
    expect(verified.userId).toBe('alice');
    expect(verified.tenantId).toBe('acme');
    expect(verified.keyId).toBe('k1');
    expect(verified.expiresAt.getTime()).toBe(expiresAt.getTime());
  });

  it('carries the topics the user may subscribe to themselves (none by default), each once', async () => {
    const base = { userId: 'alice', tenantId: 'acme', keyId: 'k1', secret, ttlSeconds: 60 };
    expect((await verifyUserToken((await signUserToken(base)).token, secret)).topics).toEqual([]);
    const { token } = await signUserToken({ ...base, topics: ['news', 'sports', 'news'] });
    expect((await verifyUserToken(token, secret)).topics).toEqual(['news', 'sports']);
    // A `top` claim with anything else in it keeps only the topic names.
    const odd = await new SignJWT({ tid: 'acme', kid: 'k1', top: ['ok', 'a b', 7, '{x}'] })
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject('alice')
      .setIssuer('herald')
      .setExpirationTime('1m')
      .sign(new TextEncoder().encode(secret));
    expect((await verifyUserToken(odd, secret)).topics).toEqual(['ok']);
  });

  it('refuses a missing token', async () => {
    await expect(verifyUserToken(undefined, secret)).rejects.toMatchObject({ code: TokenErrorCode.MISSING });
    await expect(verifyUserToken('', secret)).rejects.toMatchObject({ code: TokenErrorCode.MISSING });
  });

  it('refuses a token signed with another secret', async () => {
    const { token } = await signUserToken({
      userId: 'alice',
      tenantId: 'acme',
      keyId: 'k1',
      secret: 'another-secret-xxxxxxxxxxxx',
      ttlSeconds: 60,
    });
    await expect(verifyUserToken(token, secret)).rejects.toMatchObject({ code: TokenErrorCode.INVALID });
  });

  it('refuses an expired token, judging exp by the clock it is given (Redis’s, which the issuer minted by), else this machine’s', async () => {
    const issuedAt = new Date(Date.now() - 3_600_000);
    const { token } = await signUserToken({
      userId: 'alice',
      tenantId: 'acme',
      keyId: 'k1',
      secret,
      ttlSeconds: 60,
      now: issuedAt,
    });
    const at = (ms: number) => new Date(issuedAt.getTime() + ms);
    await expect(verifyUserToken(token, secret, at(59_000))).resolves.toMatchObject({ userId: 'alice' });
    await expect(verifyUserToken(token, secret, at(60_000))).rejects.toMatchObject({
      code: TokenErrorCode.EXPIRED,
    });
    // No clock given: this machine's, an hour after it was minted.
    await expect(verifyUserToken(token, secret)).rejects.toMatchObject({ code: TokenErrorCode.EXPIRED });
  });

  it('refuses a token without a tenant (minted before tenants existed)', async () => {
    const token = await new SignJWT({})
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setSubject('alice')
      .setIssuer('herald')
      .setIssuedAt()
      .setExpirationTime('1h')
      .sign(new TextEncoder().encode(secret));
    await expect(verifyUserToken(token, secret)).rejects.toMatchObject({
      code: TokenErrorCode.INVALID,
      message: expect.stringContaining('no tenant'),
    });
  });

  it('refuses garbage', async () => {
    await expect(verifyUserToken('not.a.jwt', secret)).rejects.toMatchObject({
      code: TokenErrorCode.INVALID,
    });
  });
});
