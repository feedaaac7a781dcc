import { createECDH, randomBytes } from 'node:crypto';
import { ErrorCode } from '@herald/protocol';
import { describe, expect, it } from 'vitest';
import { checkSubscription } from './subscription.js';

const ecdh = createECDH('prime256v1');
ecdh.generateKeys();
const keys = { p256dh: ecdh.getPublicKey('base64url'), auth: randomBytes(16).toString('base64url') };
const good = { endpoint: 'https://push.example.com/send/abc', expirationTime: null, keys };
const strict = { allowPrivate: false };

describe('checkSubscription', () => {
  it('takes PushSubscription.toJSON() and keeps only its fields', () => {
    expect(checkSubscription({ ...good, extra: 'dropped' }, strict)).toEqual(good);
    expect(checkSubscription({ endpoint: good.endpoint, keys }, strict)).toEqual(good);
  });

  it.each([
    ['not an object', 'a string'],
    ['not an object', null],
    ['endpoint is not a string', { keys }],
    ['endpoint is longer than 2048', { ...good, endpoint: `https://push.example.com/${'a'.repeat(2048)}` }],
    ['keys is not an object', { endpoint: good.endpoint }],
    ['keys.p256dh is not a P-256 public key', { ...good, keys: { ...keys, p256dh: 'AAAA' } }],
    ['keys.auth is not 16 bytes', { ...good, keys: { ...keys, auth: randomBytes(8).toString('base64url') } }],
    ['expirationTime is neither', { ...good, expirationTime: 'soon' }],
  ])('refuses a body whose %s', (message, body) => {
    const problem = checkSubscription(body, strict);
    expect(problem).toMatchObject({ code: ErrorCode.PUSH_SUBSCRIPTION_INVALID });
    expect((problem as { error: string }).error).toContain(message);
  });

  it.each([
    'http://push.example.com/send/abc',
    'ftp://push.example.com/x',
    'not a url',
    'https://127.0.0.1:8443/push',
    'https://localhost/push',
    'https://[::1]/push',
    'https://169.254.169.254/latest',
    'https://10.1.2.3/push',
    'https://user:pw@push.example.com/x',
    'https://[64:ff9b::7f00:1]/push',
    'https://[::127.0.0.1]/push',
    'https://[2002:a9fe:a9fe::]/latest',
    'https://[fec0::1]/push',
    'https://push.example.com/send/abc\u0000',
  ])('refuses the endpoint %s (https only, no private address: SSRF)', (endpoint) => {
    const problem = checkSubscription({ ...good, endpoint }, strict);
    expect(problem).toMatchObject({ code: ErrorCode.PUSH_ENDPOINT_REFUSED });
  });

  it('names HERALD_PUSH_ALLOW_PRIVATE, which allows private addresses (tests, own networks), never http', () => {
    const problem = checkSubscription({ ...good, endpoint: 'https://127.0.0.1:8443/push' }, strict);
    expect((problem as { error: string }).error).toContain('HERALD_PUSH_ALLOW_PRIVATE=true');
    const open = { allowPrivate: true };
    expect(checkSubscription({ ...good, endpoint: 'https://127.0.0.1:8443/push' }, open)).toMatchObject({
      endpoint: 'https://127.0.0.1:8443/push',
    });
    expect(checkSubscription({ ...good, endpoint: 'http://127.0.0.1:8443/push' }, open)).toMatchObject({
      code: ErrorCode.PUSH_ENDPOINT_REFUSED,
    });
  });
});
