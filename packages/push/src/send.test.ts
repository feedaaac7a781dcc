import { describe, expect, it } from 'vitest';
import { PUSH_MESSAGE_MAX_BYTES, pushMessage } from './send.js';

const base = { id: 'n-1', offset: '1700000000000-1', userId: 'alice', createdAt: '2026-12-01T17:00:00.000Z' };

describe('pushMessage', () => {
  it('carries the notification as the socket’s `notification` event has it', () => {
    expect(pushMessage({ ...base, payload: { title: 'Shipped' }, topic: 'orders' })).toEqual({
      kind: 'herald.notification',
      ...base,
      payload: { title: 'Shipped' },
      topic: 'orders',
    });
  });

  it('leaves out a payload that would not fit a push message, and says so', () => {
    const payload = { text: 'x'.repeat(PUSH_MESSAGE_MAX_BYTES) };
    const message = pushMessage({ ...base, payload, type: 'digest' });
    expect(message).toEqual({ kind: 'herald.notification', ...base, type: 'digest', truncated: true });
    expect(Buffer.byteLength(JSON.stringify(message))).toBeLessThanOrEqual(PUSH_MESSAGE_MAX_BYTES);
  });
});
