import { describe, expect, it } from 'vitest';
import { backoffDelay } from './backoff.js';

describe('backoffDelay: full jitter, 0.5 → 20 s', () => {
  it('spans min .. min + min·2^attempt, capped at max', () => {
    expect(backoffDelay(0, {}, () => 0)).toBe(500);
    expect(backoffDelay(0, {}, () => 1)).toBe(1000);
    expect(backoffDelay(3, {}, () => 1)).toBe(4500);
    expect(backoffDelay(10, {}, () => 1)).toBe(20_000);
    expect(backoffDelay(1000, {}, () => 1)).toBe(20_000);
    expect(backoffDelay(10, {}, () => 0)).toBe(500);
    expect(backoffDelay(2, { minMs: 10, maxMs: 30 }, () => 1)).toBe(30);
  });
});
