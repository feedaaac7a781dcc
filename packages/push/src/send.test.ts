import { createECDH, randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import webpush from 'web-push';
import { PUSH_MESSAGE_MAX_BYTES, pushMessage, sendPush } from './send.js';

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

describe('sendPush', () => {
  it('refuses an endpoint on a private IP literal at send time, without connecting (no lookup guards a literal)', async () => {
    let connections = 0;
    const server = createServer((socket) => {
      connections += 1;
      socket.destroy();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    const ecdh = createECDH('prime256v1');
    ecdh.generateKeys();
    const keys = { p256dh: ecdh.getPublicKey('base64url'), auth: randomBytes(16).toString('base64url') };
    const vapid = { ...webpush.generateVAPIDKeys(), subject: 'mailto:ops@example.com' };
    const send = (endpoint: string, allowPrivate: boolean) =>
      sendPush({ endpoint, expirationTime: null, keys }, pushMessage({ ...base, payload: {} }), vapid, {
        allowPrivate,
        timeoutMs: 2000,
      });
    try {
      // Stored before the subscribe-time check refused them (or while private addresses were allowed).
      for (const host of ['127.0.0.1', '[::ffff:7f00:1]', '[64:ff9b::7f00:1]', '[::7f00:1]']) {
        const outcome = await send(`https://${host}:${port}/push`, false);
        expect(outcome, host).toMatchObject({
          kind: 'rejected',
          reason: expect.stringContaining('HERALD_PUSH_ALLOW_PRIVATE'),
        });
      }
      expect(connections).toBe(0);
      expect((await send(`https://127.0.0.1:${port}/push`, true)).kind).toBe('retry');
      expect(connections).toBe(1);
    } finally {
      server.close();
    }
  });
});
