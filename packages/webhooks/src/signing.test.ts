import { createHmac, timingSafeEqual } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { generateSecret, signature } from './signing.js';

/** The README's `node:crypto` verification snippet, as a receiver would paste it. */
function verifyHerald(secret: string, headers: Record<string, string>, rawBody: string): unknown {
  const id = headers['webhook-id'];
  const timestamp = headers['webhook-timestamp'];
  if (!(Math.abs(Date.now() / 1000 - Number(timestamp)) <= 300))
    throw new Error('timestamp outside the 5-minute window');
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const expected = createHmac('sha256', key).update(`${id}.${timestamp}.${rawBody}`).digest();
  const valid = String(headers['webhook-signature'])
    .split(' ')
    .some((entry) => {
      const [version, signature] = entry.split(',');
      const given = Buffer.from(signature ?? '', 'base64');
      return version === 'v1' && given.length === expected.length && timingSafeEqual(given, expected);
    });
  if (!valid) throw new Error('invalid signature');
  return JSON.parse(rawBody);
}

function signed(secrets: string[], body: string, timestamp = Math.floor(Date.now() / 1000)) {
  return {
    'webhook-id': 'msg_test',
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signature(secrets, 'msg_test', timestamp, body),
  };
}

describe('webhook signatures (Standard Webhooks)', () => {
  const body = JSON.stringify({ type: 'notification.read', timestamp: new Date().toISOString(), data: {} });

  it('a new secret is whsec_ + base64 of 32 random bytes', () => {
    const secret = generateSecret();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(secret.slice(6), 'base64')).toHaveLength(32);
    expect(generateSecret()).not.toBe(secret);
  });

  it('the reference library and the README snippet accept what Herald signs', () => {
    const secret = generateSecret();
    const headers = signed([secret], body);
    expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body));
    expect(verifyHerald(secret, headers, body)).toEqual(JSON.parse(body));
  });

  it('matches the reference library byte for byte', () => {
    const secret = generateSecret();
    const at = new Date(1_767_225_600_000);
    expect(signature([secret], 'msg_1', 1_767_225_600, body)).toBe(
      new Webhook(secret).sign('msg_1', at, body),
    );
  });

  it('refuses a changed body, another secret, and a timestamp outside the 5-minute window', () => {
    const secret = generateSecret();
    const headers = signed([secret], body);
    const tampered = body.replace('read', 'failed');
    expect(() => new Webhook(secret).verify(tampered, headers)).toThrow();
    expect(() => verifyHerald(secret, headers, tampered)).toThrow('invalid signature');
    expect(() => new Webhook(generateSecret()).verify(body, headers)).toThrow();
    const old = signed([secret], body, Math.floor(Date.now() / 1000) - 301);
    expect(() => new Webhook(secret).verify(body, old)).toThrow();
    expect(() => verifyHerald(secret, old, body)).toThrow('5-minute window');
  });

  it('during a rotation both secrets verify (two v1 signatures)', () => {
    const [current, previous] = [generateSecret(), generateSecret()];
    const headers = signed([current, previous], body);
    expect(headers['webhook-signature'].split(' ')).toHaveLength(2);
    for (const secret of [current, previous]) {
      expect(() => new Webhook(secret).verify(body, headers)).not.toThrow();
      expect(() => verifyHerald(secret, headers, body)).not.toThrow();
    }
  });
});
