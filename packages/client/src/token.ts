/** The claims a Herald user token carries (read without verifying: the server verifies). */
export interface TokenClaims {
  /** The user id. */
  sub?: string;
  /** The tenant id. */
  tid?: string;
  /** Expiry, seconds since the epoch. */
  exp?: number;
}

/** Reads a JWT's payload; an unreadable token gives `{}` (the server will say what is wrong with it). */
export function tokenClaims(token: string): TokenClaims {
  const part = token.split('.')[1];
  if (!part) return {};
  try {
    const base64 = part.replace(/-/g, '+').replace(/_/g, '/');
    const binary = atob(base64.padEnd(base64.length + ((4 - (base64.length % 4)) % 4), '='));
    const bytes = Uint8Array.from(binary, (char) => char.charCodeAt(0));
    const claims = JSON.parse(new TextDecoder().decode(bytes)) as unknown;
    return typeof claims === 'object' && claims !== null ? (claims as TokenClaims) : {};
  } catch {
    return {};
  }
}

/**
 * When to fetch the next token (ms from `now`): at 80 % of its remaining life, and at least 5 s before
 * `exp` (a clock a few seconds off still refreshes in time); undefined without an `exp`.
 */
export function refreshDelay(claims: TokenClaims, now = Date.now()): number | undefined {
  if (typeof claims.exp !== 'number') return undefined;
  const left = claims.exp * 1000 - now;
  return Math.max(0, Math.min(left * 0.8, left - 5000));
}
