import { describe, expect, it } from 'vitest';
import { refreshDelay, tokenClaims } from './token.js';

const jwt = (payload: object) =>
  `e30.${Buffer.from(JSON.stringify(payload)).toString('base64url')}.signature`;

describe('token: claims read without verifying, refresh before exp', () => {
  it('reads sub, tid and exp; garbage gives {}', () => {
    expect(tokenClaims(jwt({ sub: 'ålice', tid: 'acme', exp: 1_800_000_000 }))).toEqual({
      sub: 'ålice',
      tid: 'acme',
      exp: 1_800_000_000,
    });
    expect(tokenClaims('nope')).toEqual({});
    expect(tokenClaims('a.%%%.c')).toEqual({});
  });

  it('refreshes at 80 % of the remaining life, at least 5 s before exp, never before half of it, never negative', () => {
    const now = 1_000_000_000_000;
    expect(refreshDelay({ exp: now / 1000 + 3600 }, now)).toBe(2_880_000);
    expect(refreshDelay({ exp: now / 1000 + 20 }, now)).toBe(15_000);
    expect(refreshDelay({ exp: now / 1000 + 10 }, now)).toBe(5000);
    // A token of 5 s or less: at half its life (before: at once, ~50 refreshes and sockets a second per tab).
    expect(refreshDelay({ exp: now / 1000 + 5 }, now)).toBe(2500);
    expect(refreshDelay({ exp: now / 1000 + 2 }, now)).toBe(1000);
    expect(refreshDelay({ exp: now / 1000 - 1 }, now)).toBe(0);
    expect(refreshDelay({}, now)).toBeUndefined();
  });

  it('with an iat: counts the token’s own life (exp − iat) from when it arrived, whatever this clock says', () => {
    const now = 1_000_000_000_000;
    // An hour's token minted by servers an hour behind this clock: by `exp` alone, expired on arrival.
    const behind = { iat: now / 1000 - 3600, exp: now / 1000 };
    expect(refreshDelay(behind, now, now)).toBe(2_880_000);
    expect(refreshDelay(behind, now + 60_000, now)).toBe(2_832_000);
    expect(refreshDelay(behind, now + 3_600_000, now)).toBe(0);
    // A 3 s token received 1 s ago: half of what is left.
    expect(refreshDelay({ iat: 0, exp: 3 }, 1000, 0)).toBe(1000);
  });
});
