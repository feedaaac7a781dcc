import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERRORS, ErrorCode, errorSpec, httpStatusOf } from './error-codes.js';

const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');

/**
 * `<status> <code>` for every row of the README's HTTP error tables: a row whose first cell is a status
 * in backticks (`` `429` ``) and whose last cell lists codes in backticks.
 */
function readmePairs(): Set<string> {
  const pairs = new Set<string>();
  for (const line of readme.split('\n')) {
    const cells = line.split(/(?<!\\)\|/).map((cell) => cell.trim());
    // '| a | b | c |' splits into ['', a, b, c, ''].
    const status = /^`(\d{3})`$/.exec(cells[1] ?? '')?.[1];
    if (status === undefined || cells.length < 4) continue;
    const codes = (cells[cells.length - 2] ?? '').match(/HERALD_ERR_[A-Z_]+/g) ?? [];
    for (const code of codes) pairs.add(`${status} ${code}`);
  }
  return pairs;
}

describe('the error catalogue', () => {
  it('has one entry per code, each named after its code', () => {
    const codes = Object.values(ERRORS).map((spec) => spec.code);
    expect(new Set(codes).size).toBe(codes.length);
    for (const [name, spec] of Object.entries(ERRORS)) {
      expect(spec.code.endsWith(name)).toBe(true);
      expect(spec.code).toMatch(/^HERALD_(ERR_)?[A-Z_]+$/);
      expect(spec.message.length).toBeGreaterThan(0);
      expect(errorSpec(spec.code)).toBe(spec);
    }
    expect(ErrorCode.RATE_LIMITED).toBe('HERALD_ERR_RATE_LIMITED');
    expect(httpStatusOf(ErrorCode.IDEMPOTENCY_MISMATCH)).toBe(422);
    expect(Object.isFrozen(ErrorCode)).toBe(true);
  });

  it("matches README.md's HTTP error tables both ways: every row is in the catalogue with its status, every HTTP code is in a row", () => {
    const documented = readmePairs();
    expect(documented.size).toBeGreaterThan(10);
    const catalogued = new Set(
      Object.values(ERRORS).flatMap((spec) => ('status' in spec ? [`${spec.status} ${spec.code}`] : [])),
    );
    expect([...documented].filter((pair) => !catalogued.has(pair)).sort()).toEqual([]);
    expect([...catalogued].filter((pair) => !documented.has(pair)).sort()).toEqual([]);
  });
});
