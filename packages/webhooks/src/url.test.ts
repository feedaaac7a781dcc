import type { LookupAddress } from 'node:dns';
import { describe, expect, it, vi } from 'vitest';
import { retryDelayMs } from './delivery.js';
import {
  checkWebhookUrl,
  guardedLookup,
  guardedLookupFor,
  isNonPublicAddress,
  PrivateAddressError,
} from './url.js';

// Names that resolve to IPv6 addresses carrying an IPv4 one (as a NAT64 resolver, DNS64, answers).
const RESOLVES: Record<string, string> = {
  'nat64-loopback.test': '64:ff9b::7f00:1',
  'nat64-public.test': '64:ff9b::808:808',
};
vi.mock('node:dns', async (importOriginal) => {
  const dns = await importOriginal<typeof import('node:dns')>();
  const lookup = (hostname: string, options: object, callback: (...args: unknown[]) => void) => {
    const address = RESOLVES[hostname];
    if (address === undefined) return dns.lookup(hostname, options, callback);
    callback(null, [{ address, family: 6 }]);
  };
  return { ...dns, default: { ...dns, lookup }, lookup };
});

/** IPv6 forms that carry an IPv4 address, each filled with `ipv4` (dotted) as its own form stores it. */
function embeddings(ipv4: string): Record<string, string> {
  const [a = 0, b = 0, c = 0, d = 0] = ipv4.split('.').map(Number);
  const hex = (x: number, y: number) => ((x << 8) | y).toString(16);
  const high = hex(a, b);
  const low = hex(c, d);
  return {
    'IPv4-mapped ::ffff:0:0/96': `::ffff:${high}:${low}`,
    'IPv4-mapped, dotted': `::ffff:${ipv4}`,
    'IPv4-compatible ::/96': `::${high}:${low}`,
    'IPv4-compatible, dotted': `::${ipv4}`,
    'IPv4-translated ::ffff:0:0:0/96': `::ffff:0:${high}:${low}`,
    'NAT64 64:ff9b::/96': `64:ff9b::${high}:${low}`,
    'NAT64, dotted': `64:ff9b::${ipv4}`,
    '6to4 2002::/16': `2002:${high}:${low}::1`,
  };
}

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

  it('judges an IPv6 address that carries an IPv4 one (mapped, compatible, NAT64, 6to4) by that IPv4', () => {
    for (const inner of [
      '127.0.0.1',
      '10.1.2.3',
      '192.168.0.10',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
    ]) {
      for (const [form, address] of Object.entries(embeddings(inner))) {
        expect(isNonPublicAddress(address), `${form}: ${address} (${inner})`).toBe(true);
      }
    }
    for (const inner of ['8.8.8.8', '93.184.216.34']) {
      for (const [form, address] of Object.entries(embeddings(inner))) {
        expect(isNonPublicAddress(address), `${form}: ${address} (${inner})`).toBe(false);
      }
    }
  });

  it('refuses the IPv6 ranges that are not globally reachable, Teredo and all outside global unicast 2000::/3', () => {
    for (const address of [
      '64:ff9b:1::a00:1', // NAT64 local-use 64:ff9b:1::/48
      '64:ff9b:1:ffff::808:808',
      '100::1', // discard-only 100::/64
      '2001::1', // Teredo 2001::/32 (any server and client)
      '2001:0:4136:e378:8000:63bf:3fff:fdd2',
      '2001:2::1', // benchmarking
      '2001:10::1', // deprecated ORCHID
      '2001:db8::1', // documentation
      '3fff::1', // documentation
      '3fff:fff::1',
      '5f00::1', // SRv6 SIDs
      'fc00::1', // unique local
      'fd12:3456::1',
      'fe80::1%eth0', // link-local (with a zone, as lookup answers it)
      'fec0::1', // site-local (deprecated)
      'ff02::1', // multicast
      'ff0e::1',
      '4000::1', // reserved by the IETF (outside 2000::/3)
      '1::1',
    ]) {
      expect(isNonPublicAddress(address), address).toBe(true);
    }
    for (const address of [
      '2a00:1450:4001:82b::200e',
      '2001:4860:4860::8888',
      '2620:4f:8000::1',
      '2a03:2880::1',
    ]) {
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
      // Port 0 is no port: no connection could ever be made to it.
      'https://example.com:0/hook',
      'http://example.com:00/hook',
    ]) {
      expect(checkWebhookUrl(url, { allowPrivate: true })?.kind, url).toBe('invalid');
    }
    expect(checkWebhookUrl('https://example.com:0/hook', { allowPrivate: true })?.message).toBe(
      'has port 0, which nothing can listen on: give the port the receiver listens on, or none (443 for https, 80 for http)',
    );
    expect(checkWebhookUrl('https://example.com/hook', { allowPrivate: false })).toBeUndefined();
    expect(checkWebhookUrl('https://example.com:8443/hook', { allowPrivate: false })).toBeUndefined();
    // A port out of range is told as such, not as "not an absolute URL".
    for (const url of ['https://example.com:99999/', 'http://example.com:65536/hook']) {
      expect(checkWebhookUrl(url, { allowPrivate: true }), url).toEqual({
        kind: 'invalid',
        message: `has port ${url.split(':')[2]?.split('/')[0]}: a port is 1 to 65535`,
      });
    }
    expect(checkWebhookUrl('https://example.com:65535/', { allowPrivate: false })).toBeUndefined();
  });

  it('refuses control characters, which the URL parser would silently drop (the stored URL would keep them)', () => {
    for (const url of [
      'https://example.com\u0000',
      '\u0000https://example.com/',
      'https://exam\tple.com/',
      'https://example.com/a\nb',
      'https://example.com/\r',
      'https://example.com/\u001f',
      'https://example.com/\u007f',
      'https://example.com/\u0085',
    ]) {
      const problem = checkWebhookUrl(url, { allowPrivate: true });
      expect(problem?.kind, JSON.stringify(url)).toBe('invalid');
      expect(problem?.message, JSON.stringify(url)).toContain('control character');
    }
  });

  it('refuses loopback and private hosts unless allowed', () => {
    for (const url of [
      'http://localhost:9000/',
      'http://api.localhost/',
      // The root's trailing dot names the same host (accepted before: only a resolver that knows it refused it).
      'http://localhost./',
      'http://LOCALHOST.:9000/',
      'http://api.localhost./',
      'http://127.0.0.1/',
      'http://[::1]:80/',
      'http://169.254.169.254/latest',
      'http://[64:ff9b::7f00:1]:47110/hook',
      'http://[64:ff9b::127.0.0.1]:47110/hook',
      'http://[::127.0.0.1]:47110/',
      'http://[::ffff:127.0.0.1]/',
      'http://[::ffff:0:a00:1]/',
      'http://[2002:7f00:1::]/',
      'http://[2002:a9fe:a9fe::1]/latest',
      'http://[64:ff9b:1::808:808]/',
      'http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/',
      'http://[fec0::1]/',
      'http://[3fff::1]/',
    ]) {
      expect(checkWebhookUrl(url, { allowPrivate: false })?.kind, url).toBe('private');
      expect(checkWebhookUrl(url, { allowPrivate: true }), url).toBeUndefined();
    }
  });

  it('accepts the IPv4-carrying forms of a public IPv4 (NAT64 of a public address is legitimate)', () => {
    for (const url of [
      'http://[64:ff9b::808:808]/hook',
      'https://[64:ff9b::8.8.8.8]:8443/hook',
      'http://[::ffff:8.8.8.8]/',
      'http://[2002:808:808::1]/',
      'http://[2606:4700:4700::1111]/',
    ]) {
      expect(checkWebhookUrl(url, { allowPrivate: false }), url).toBeUndefined();
    }
  });

  it('refuses, when connecting, a name that resolves to an IPv6 form of a private IPv4; passes a public one', async () => {
    const resolve = (hostname: string) =>
      new Promise<{ error: Error | null; addresses?: LookupAddress[] }>((done) =>
        guardedLookup(hostname, { all: true }, (error, addresses) =>
          done({ error, addresses: addresses as unknown as LookupAddress[] }),
        ),
      );
    const refused = await resolve('nat64-loopback.test');
    expect(refused.error).toBeInstanceOf(PrivateAddressError);
    expect(refused.error?.message).toContain('64:ff9b::7f00:1');
    expect(await resolve('nat64-public.test')).toEqual({
      error: null,
      addresses: [{ address: '64:ff9b::808:808', family: 6 }],
    });
  });

  it('names the setting of its caller: a push endpoint refused at connection says HERALD_PUSH_ALLOW_PRIVATE', async () => {
    const refusal = (lookup: typeof guardedLookup) =>
      new Promise<Error | null>((done) =>
        lookup('nat64-loopback.test', { all: true }, (error) => done(error)),
      );
    expect((await refusal(guardedLookup))?.message).toContain('HERALD_WEBHOOK_ALLOW_PRIVATE');
    const push = await refusal(guardedLookupFor('HERALD_PUSH_ALLOW_PRIVATE'));
    expect(push).toBeInstanceOf(PrivateAddressError);
    expect(push?.message).toContain('HERALD_PUSH_ALLOW_PRIVATE');
    expect(push?.message).not.toContain('WEBHOOK');
  });

  it('backs off exponentially, ±20%, at most an hour', () => {
    expect(retryDelayMs(1000, 1, () => 0.5)).toBe(1000);
    expect(retryDelayMs(1000, 4, () => 0.5)).toBe(8000);
    expect(retryDelayMs(1000, 4, () => 0)).toBe(6400);
    expect(retryDelayMs(1000, 4, () => 1)).toBe(9600);
    expect(retryDelayMs(1000, 40, () => 0.5)).toBe(3_600_000);
  });
});
