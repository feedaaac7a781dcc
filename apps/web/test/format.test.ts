import { describe, expect, it } from 'vitest';
import { problemText, relativeFormat } from '../src/inbox/format.js';

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

describe('problemText (what the inbox says of a connection problem)', () => {
  it('the server’s messages for developers become plain words (before: "get a new one from POST /tokens" on the user’s screen); others stay as the client said them', () => {
    expect(
      problemText({
        code: 'HERALD_ERR_TOKEN_EXPIRED',
        message: 'Token expired: get a new one from POST /tokens, then reconnect with your lastOffset.',
      }),
    ).toBe('your session expired; renewing it');
    expect(
      problemText({
        code: 'HERALD_SERVER_SHUTDOWN',
        message: 'This server is shutting down: reconnect (to any instance) with your lastOffset.',
      }),
    ).not.toContain('lastOffset');
    expect(problemText({ code: 'HERALD_ERR_TOKEN_UNAVAILABLE', message: '/dev/token answered 500' })).toBe(
      '/dev/token answered 500',
    );
  });
});
