import { describe, expect, it } from 'vitest';
import { inboxSettings } from './settings.js';

describe('inbox settings', () => {
  it('maps parsed env values to Inbox options', () => {
    expect(
      inboxSettings({
        HERALD_INBOX_PREFIX: 'p:',
        HERALD_INBOX_MAX_LENGTH: 5,
        HERALD_INBOX_MAX_AGE_MS: 1000,
        HERALD_INBOX_RECORD_GRACE_MS: 60_000,
      }),
    ).toEqual({ prefix: 'p:', maxLength: 5, maxAgeMs: 1000, recordGraceMs: 60_000 });
  });
});
