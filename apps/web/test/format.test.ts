import { describe, expect, it } from 'vitest';
import { relativeFormat } from '../src/inbox/format.js';

describe('relativeFormat (the lang attribute of <herald-inbox>)', () => {
  it('takes a language tag', () => {
    expect(relativeFormat('fr').format(-1, 'day')).toBe('hier');
    expect(relativeFormat(undefined).resolvedOptions().numeric).toBe('auto');
  });

  it('a tag that is none (en_US, "") falls back to the browser’s language instead of throwing (before: the element rendered nothing)', () => {
    for (const tag of ['en_US', 'not a tag', '']) {
      expect(() => relativeFormat(tag), tag).not.toThrow();
      expect(relativeFormat(tag).format(-1, 'day'), tag).toBe(
        new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' }).format(-1, 'day'),
      );
    }
  });
});
