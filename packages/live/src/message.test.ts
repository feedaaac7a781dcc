import { describe, expect, it } from 'vitest';
import { decodeLiveMessage, encodeLiveMessage, LiveMessageError, liveChannel } from './message.js';

describe('live message', () => {
  it('round-trips through JSON', () => {
    const message = {
      v: 1,
      kind: 'unread',
      tenantId: 'acme',
      userId: 'org/bob',
      unread: { count: 2, version: 5 },
    } as const;
    expect(decodeLiveMessage(encodeLiveMessage(message))).toEqual(message);
  });

  it('refuses what is not a v1 live message', () => {
    for (const text of [
      'nope',
      'null',
      '{"v":2,"kind":"unread","tenantId":"t","userId":"u","unread":{}}',
      '{"v":1,"kind":"x","tenantId":"t","userId":"u"}',
      '{"v":1,"kind":"unread","tenantId":"t","userId":"u"}',
      '{"v":1,"kind":"unread"}',
    ]) {
      expect(() => decodeLiveMessage(text), text).toThrow(LiveMessageError);
    }
  });

  it('names one hash-tagged channel per user of a tenant', () => {
    expect(liveChannel('herald', 'acme', 'alice')).toBe('herald:live:{acme/alice}');
    expect(liveChannel('herald', 'globex', 'alice')).not.toBe(liveChannel('herald', 'acme', 'alice'));
  });
});
