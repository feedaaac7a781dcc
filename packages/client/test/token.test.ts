import { describe, expect, it } from 'vitest';
import { refreshDelay } from '../src/index.js';

describe('refreshDelay', () => {
  it('at 80 % of the life, at least 5 s before exp', () => {
    expect(refreshDelay({ iat: 0, exp: 60 }, 0, 0)).toBe(48_000);
    expect(refreshDelay({ iat: 0, exp: 20 }, 0, 0)).toBe(15_000);
    expect(refreshDelay({ iat: 0, exp: 3600 }, 0, 0)).toBe(2_880_000);
  });

  it('a token of 10 s or less is refreshed at half its life, not at once (before: 0 ms, ~50 refreshes and sockets a second per tab)', () => {
    expect(refreshDelay({ iat: 0, exp: 10 }, 0, 0)).toBe(5000);
    expect(refreshDelay({ iat: 0, exp: 5 }, 0, 0)).toBe(2500);
    expect(refreshDelay({ iat: 0, exp: 3 }, 0, 0)).toBe(1500);
    // Received 1 s ago: half of what is left.
    expect(refreshDelay({ iat: 0, exp: 3 }, 1000, 0)).toBe(1000);
  });

  it('an expired token: at once; no exp: never', () => {
    expect(refreshDelay({ iat: 0, exp: 3 }, 5000, 0)).toBe(0);
    expect(refreshDelay({})).toBeUndefined();
  });
});
