import { describe, expect, it } from 'vitest';
import { retryDelayMs } from './delivery.js';
import { checkWebhookUrl, isNonPublicAddress } from './url.js';

describe('webhook URLs (SSRF)', () => {
  it('classifies addresses: loopback, private, link-local, mapped and reserved are not public', () => {
    for (const address of [
      '127.0.0.1',
      '10.2.3.4',
      '172.16.0.1',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '::1',
      '::',
      'fd00::1',
      'fe80::1',
      '::ffff:127.0.0.1',
      '::ffff:10.0.0.1',
    ]) {
      expect(isNonPublicAddress(address), address).toBe(true);
    }
    for (const address of ['93.184.216.34', '8.8.8.8', '2606:4700:4700::1111', '::ffff:8.8.8.8']) {
      expect(isNonPublicAddress(address), address).toBe(false);
    }
  });

  it('refuses what is not an http(s) URL, credentials and fragments, with a message for the field', () => {
    for (const url of [
      'not a url',
      'ftp://example.com/x',
      'file:///etc/passwd',
      'https://u:p@example.com/',
      'https://example.com/#x',
    ]) {
      expect(checkWebhookUrl(url, { allowPrivate: true })?.kind, url).toBe('invalid');
    }
    expect(checkWebhookUrl('https://example.com/hook', { allowPrivate: false })).toBeUndefined();
  });

  it('refuses loopback and private hosts unless allowed', () => {
    for (const url of [
      'http://localhost:9000/',
      'http://api.localhost/',
      'http://127.0.0.1/',
      'http://[::1]:80/',
      'http://169.254.169.254/latest',
    ]) {
      expect(checkWebhookUrl(url, { allowPrivate: false })?.kind, url).toBe('private');
      expect(checkWebhookUrl(url, { allowPrivate: true }), url).toBeUndefined();
    }
  });

  it('backs off exponentially, ±20%, at most an hour', () => {
    expect(retryDelayMs(1000, 1, () => 0.5)).toBe(1000);
    expect(retryDelayMs(1000, 4, () => 0.5)).toBe(8000);
    expect(retryDelayMs(1000, 4, () => 0)).toBe(6400);
    expect(retryDelayMs(1000, 4, () => 1)).toBe(9600);
    expect(retryDelayMs(1000, 40, () => 0.5)).toBe(3_600_000);
  });
});
