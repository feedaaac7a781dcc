import { ReplyError } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { isRefusedForItsData } from './fanout.js';

describe('isRefusedForItsData (a fan-out skips such a recipient, recorded failed)', () => {
  it('is true for a key of the wrong type, as Redis answers it from a script, and through causes', () => {
    const wrongType = new ReplyError(
      'WRONGTYPE Operation against a key holding the wrong kind of value script: 5d1f…, on @user_script:180.',
    );
    expect(isRefusedForItsData(wrongType)).toBe(true);
    // As the append script answers it (Redis 7.0: re-raised from the script's pcall).
    const fromAppend = new ReplyError(
      'ERR user_script:310: WRONGTYPE Operation against a key holding the wrong kind of value script: 890c…, on @user_script:310.',
    );
    expect(isRefusedForItsData(fromAppend)).toBe(true);
    expect(isRefusedForItsData(new Error('append failed', { cause: wrongType }))).toBe(true);
  });

  it('is false for any other error: a script error (a defect: every recipient would be refused alike) fails the attempt instead', () => {
    for (const error of [
      new ReplyError('ERR user_script:42: Script attempted to access nonexistent global variable'),
      new ReplyError('NOSCRIPT No matching script.'),
      new Error('Connection is closed.'),
      new TypeError("Cannot read properties of undefined (reading 'id')"),
      'WRONGTYPE as a string, not an Error',
    ]) {
      expect(isRefusedForItsData(error), String(error)).toBe(false);
    }
  });
});
