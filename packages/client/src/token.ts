/** The claims a Herald user token carries (read without verifying: the server verifies). */
export interface TokenClaims {
  /** The user id. */
  sub?: string;
  /** The tenant id. */
  tid?: string;
  /** Expiry, seconds since the epoch. */
  exp?: number;
  /** Issue time, seconds since the epoch (the server's clock). */
  iat?: number;
}

/** The bytes of base64url text (a JWT's part, a VAPID key); throws on what is none. */
export function base64UrlBytes(base64url: string): Uint8Array<ArrayBuffer> {
  const base64 = base64url.replace(/-/g, '+').replace(/_/g, '/');
  const binary = atob(base64 + '='.repeat((4 - (base64.length % 4)) % 4));
  return Uint8Array.from(binary, (char) => char.charCodeAt(0));
}

/** Reads a JWT's payload; an unreadable token gives `{}` (the server will say what is wrong with it). */
export function tokenClaims(token: string): TokenClaims {
  const part = token.split('.')[1];
  if (!part) return {};
  try {
    const claims = JSON.parse(new TextDecoder().decode(base64UrlBytes(part))) as unknown;
    return typeof claims === 'object' && claims !== null ? (claims as TokenClaims) : {};
  } catch {
    return {};
  }
}

/**
 * When to fetch the next token (ms from `now`): at 80 % of its remaining life, and at least 5 s before
 * `exp`, but never before half of it; undefined without an `exp`. With an `iat`, the life is the token's own (`exp` − `iat`, both the
 * server's clock) counted from `receivedAt` (when `getToken()` answered it, this clock), so a client
 * clock that is off does not matter (an hour ahead, every token looked expired on arrival and was
 * replaced at once, in a loop); without one, `exp` by this clock.
 */
export function refreshDelay(claims: TokenClaims, now = Date.now(), receivedAt = now): number | undefined {
  const { exp, iat } = claims;
  if (typeof exp !== 'number') return undefined;
  const left = typeof iat === 'number' ? (exp - iat) * 1000 - now + receivedAt : exp * 1000 - now;
  // Half the life at least: a token of 5 s or less was replaced at once, in a loop (~50 a second).
  return Math.max(0, left / 2, Math.min(left * 0.8, left - 5000));
}
