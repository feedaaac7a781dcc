import { errors, jwtVerify, SignJWT } from 'jose';
import { ErrorCode } from './error-codes.js';
import { TOPIC_MAX_LENGTH, TOPIC_PATTERN } from './schemas.js';
import { isTenantId } from './tenancy.js';

const TOPIC = new RegExp(TOPIC_PATTERN);

const ALGORITHM = 'HS256';

/**
 * Secret the gateway signs and the realtime server verifies user tokens with when
 * `HERALD_JWT_SECRET` is unset. Development only: both apps log a warning when they use it.
 */
export const DEV_JWT_SECRET = 'herald-dev-secret-change-me';
/** `iss` claim of every token Herald signs. */
export const TOKEN_ISSUER = 'herald';

/** Why a user token was refused; stable codes for `connect_error` data. */
export const TokenErrorCode = {
  MISSING: ErrorCode.TOKEN_MISSING,
  EXPIRED: ErrorCode.TOKEN_EXPIRED,
  INVALID: ErrorCode.TOKEN_INVALID,
  /** The API key that minted the token was revoked. */
  REVOKED: ErrorCode.TOKEN_REVOKED,
} as const;
export type TokenErrorCode = (typeof TokenErrorCode)[keyof typeof TokenErrorCode];

/** A user token that cannot be accepted; `message` says what the client should do. */
export class UserTokenError extends Error {
  readonly code: TokenErrorCode;
  constructor(code: TokenErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'UserTokenError';
    this.code = code;
  }
}

function keyOf(secret: string): Uint8Array {
  return new TextEncoder().encode(secret);
}

/** Whom a verified user token was issued for, and by which API key. */
export interface UserTokenClaims {
  userId: string;
  /** The tenant of the API key that minted the token: the socket acts only inside it. */
  tenantId: string;
  /** Id of the API key that minted the token: revoking the key ends the token. */
  keyId: string;
  expiresAt: Date;
  /**
   * Topics the user may subscribe to and unsubscribe from themselves (claim `top`, set by the backend in
   * `POST /tokens`); empty when the token allows none.
   */
  topics: string[];
}

/**
 * Signs the token a backend hands to its browser so that it can connect as `userId` of `tenantId`.
 * Claims: `sub` = user id, `tid` = tenant id, `kid` = the minting API key's id, `iss`, `iat`, `exp`, and
 * `top` = the topics the user may subscribe to themselves (only when `topics` names some).
 *
 * @example
 * ```ts
 * const { token, expiresAt } = await signUserToken({ userId: 'alice', tenantId: 'acme', keyId, secret, ttlSeconds: 3600 });
 * ```
 */
export async function signUserToken(options: {
  userId: string;
  tenantId: string;
  keyId: string;
  secret: string;
  ttlSeconds: number;
  now?: Date;
  topics?: readonly string[] | undefined;
}): Promise<{ token: string; expiresAt: Date }> {
  const issuedAt = Math.floor((options.now ?? new Date()).getTime() / 1000);
  const expiresAtSeconds = issuedAt + options.ttlSeconds;
  const topics = options.topics?.length ? { top: [...new Set(options.topics)] } : {};
  const token = await new SignJWT({ tid: options.tenantId, kid: options.keyId, ...topics })
    .setProtectedHeader({ alg: ALGORITHM, typ: 'JWT' })
    .setSubject(options.userId)
    .setIssuer(TOKEN_ISSUER)
    .setIssuedAt(issuedAt)
    .setExpirationTime(expiresAtSeconds)
    .sign(keyOf(options.secret));
  return { token, expiresAt: new Date(expiresAtSeconds * 1000) };
}

/**
 * Verifies a user token and returns whom it was issued for. A token without a tenant (minted before
 * Herald had tenants) is refused: the client gets a new one. `now` is the clock its `exp` is judged by:
 * the issuer's (Herald's apps pass Redis's, which the gateway signs with), else this machine's.
 *
 * @throws {UserTokenError} when the token is missing, expired, forged or malformed.
 * @example
 * ```ts
 * const { userId, tenantId, keyId, expiresAt } = await verifyUserToken(socket.handshake.auth.token, secret);
 * ```
 */
export async function verifyUserToken(token: unknown, secret: string, now?: Date): Promise<UserTokenClaims> {
  if (typeof token !== 'string' || token.length === 0) {
    throw new UserTokenError(
      TokenErrorCode.MISSING,
      'No token: pass { auth: { token } } from POST /tokens when connecting.',
    );
  }
  try {
    const { payload } = await jwtVerify(token, keyOf(secret), {
      algorithms: [ALGORITHM],
      issuer: TOKEN_ISSUER,
      requiredClaims: ['sub', 'exp'],
      ...(now === undefined ? {} : { currentDate: now }),
    });
    if (typeof payload.sub !== 'string' || payload.sub.length === 0 || payload.exp === undefined) {
      throw new UserTokenError(
        TokenErrorCode.INVALID,
        'Token has no subject: get a new one from POST /tokens.',
      );
    }
    if (!isTenantId(payload.tid) || typeof payload.kid !== 'string' || payload.kid.length === 0) {
      throw new UserTokenError(
        TokenErrorCode.INVALID,
        'Token has no tenant (minted before tenants existed): get a new one from POST /tokens.',
      );
    }
    return {
      userId: payload.sub,
      tenantId: payload.tid,
      keyId: payload.kid,
      expiresAt: new Date(payload.exp * 1000),
      topics: topicsOf(payload.top),
    };
  } catch (error) {
    if (error instanceof UserTokenError) throw error;
    if (error instanceof errors.JWTExpired) {
      throw new UserTokenError(TokenErrorCode.EXPIRED, 'Token expired: get a new one from POST /tokens.', {
        cause: error,
      });
    }
    throw new UserTokenError(
      TokenErrorCode.INVALID,
      'Token invalid (bad signature or malformed): get a new one from POST /tokens.',
      { cause: error },
    );
  }
}

/** The `top` claim's topic names (only well-formed ones: the claim is signed, the check is belt and braces). */
function topicsOf(claim: unknown): string[] {
  if (!Array.isArray(claim)) return [];
  return claim.filter(
    (topic): topic is string =>
      typeof topic === 'string' && topic.length <= TOPIC_MAX_LENGTH && TOPIC.test(topic),
  );
}
