import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';

const ipv4Range = (cidr: string): [ipaddr.IPv4, number] => ipaddr.IPv4.parseCIDR(cidr);
const ipv6Range = (cidr: string): [ipaddr.IPv6, number] => ipaddr.IPv6.parseCIDR(cidr);

/**
 * Addresses a webhook may not reach unless the operator allows it (`HERALD_WEBHOOK_ALLOW_PRIVATE`,
 * `HERALD_DEV_MODE`), so that a tenant's URL never reaches Herald's own Redis or the operator's network
 * (SSRF). In IPv4: "this network", private, carrier-grade NAT, loopback, link-local (cloud metadata at
 * 169.254.169.254), IETF protocol assignments, documentation, benchmarking, multicast, reserved and
 * broadcast. IPv6 below.
 */
const NON_PUBLIC_IPV4 = [
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '169.254.0.0/16',
  '172.16.0.0/12',
  '192.0.0.0/24',
  '192.0.2.0/24',
  '192.168.0.0/16',
  '198.18.0.0/15',
  '198.51.100.0/24',
  '203.0.113.0/24',
  '224.0.0.0/4',
  '240.0.0.0/4',
].map(ipv4Range);

/**
 * IPv6 forms that carry an IPv4 address, and the byte where it starts: such an address is judged by
 * the IPv4 inside, since a translator or tunnel on the way delivers to that IPv4 (`64:ff9b::7f00:1` is
 * 127.0.0.1 behind a NAT64; `64:ff9b::808:808`, 8.8.8.8, is as public as 8.8.8.8).
 */
const CARRIES_IPV4: { range: [ipaddr.IPv6, number]; at: number }[] = [
  { range: ipv6Range('::ffff:0:0/96'), at: 12 }, // IPv4-mapped (RFC 4291)
  { range: ipv6Range('::ffff:0:0:0/96'), at: 12 }, // IPv4-translated (SIIT, RFC 2765)
  { range: ipv6Range('::/96'), at: 12 }, // IPv4-compatible (RFC 4291, deprecated); :: is 0.0.0.0, ::1 0.0.0.1
  { range: ipv6Range('64:ff9b::/96'), at: 12 }, // NAT64 well-known prefix (RFC 6052)
  { range: ipv6Range('2002::/16'), at: 2 }, // 6to4 (RFC 3056): relays send to the IPv4 in bits 16-47
];

/**
 * Only global unicast (2000::/3) is allocated on the internet (IANA IPv6 Address Space): everything
 * outside is refused, among it the unspecified and loopback addresses, the NAT64 local-use prefix
 * 64:ff9b:1::/48 (the IPv4's place in it depends on the operator's prefix length), discard-only
 * 100::/64, SRv6 SIDs 5f00::/16, unique local fc00::/7, link-local fe80::/10, site-local fec0::/10 and
 * multicast ff00::/8.
 */
const GLOBAL_UNICAST = ipv6Range('2000::/3');

/**
 * Within global unicast, the IANA IPv6 Special-Purpose Address Registry's blocks that are not
 * globally reachable. 2001::/23 goes whole: it holds Teredo 2001::/32, refused rather than decoded
 * (its server IPv4 is in bits 32-63 and its client's, inverted, in the last 32: two addresses to
 * judge, for a tunnel that is all but retired and that no webhook receiver lives behind), benchmarking
 * and ORCHID; the few globally reachable anycast services in it (PCP, TURN, AMT, AS112) are not HTTP
 * endpoints.
 */
const NON_PUBLIC_IPV6 = ['2001::/23', '2001:db8::/32', '3fff::/20'].map(ipv6Range);

/** The IPv4 address an IPv6 one carries ({@link CARRIES_IPV4}), if any. */
function carriedIPv4(address: ipaddr.IPv6): ipaddr.IPv4 | undefined {
  const carrier = CARRIES_IPV4.find(({ range }) => address.match(range));
  if (carrier === undefined) return undefined;
  return new ipaddr.IPv4(address.toByteArray().slice(carrier.at, carrier.at + 4));
}

function isNonPublicIPv4(address: ipaddr.IPv4): boolean {
  return NON_PUBLIC_IPV4.some((range) => address.match(range));
}

function isNonPublicIPv6(address: ipaddr.IPv6): boolean {
  const ipv4 = carriedIPv4(address);
  if (ipv4 !== undefined) return isNonPublicIPv4(ipv4);
  return !address.match(GLOBAL_UNICAST) || NON_PUBLIC_IPV6.some((range) => address.match(range));
}

/**
 * True when `address` (an IP literal) is not a public internet address: in a non-public IPv4 range,
 * an IPv6 form carrying such an IPv4 (mapped, translated, compatible, NAT64, 6to4), outside IPv6
 * global unicast or in one of its non-public blocks. Anything that is not an IP address is too. The
 * addresses are parsed by ipaddr.js (every IPv6 spelling: `::`, an embedded dotted quad, a zone).
 *
 * @example
 * ```ts
 * isNonPublicAddress('10.1.2.3');        // true
 * isNonPublicAddress('::ffff:127.0.0.1'); // true
 * isNonPublicAddress('64:ff9b::7f00:1'); // true: 127.0.0.1 behind a NAT64
 * isNonPublicAddress('93.184.216.34');   // false
 * ```
 */
export function isNonPublicAddress(address: string): boolean {
  if (isIP(address) === 0) return true;
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = ipaddr.parse(address);
  } catch {
    return true;
  }
  return parsed instanceof ipaddr.IPv6 ? isNonPublicIPv6(parsed) : isNonPublicIPv4(parsed);
}

/** Why a webhook URL is refused: `invalid` (not a usable URL) or `private` (a non-public address). */
export interface UrlProblem {
  kind: 'invalid' | 'private';
  message: string;
}

/**
 * Checks a webhook URL before it is stored: absolute `http:`/`https:`, no control characters, no
 * credentials, no fragment, not port 0, and (unless `allowPrivate`) a host that is not a non-public IP literal
 * ({@link isNonPublicAddress}) or `localhost`. `setting` names the variable that allows private
 * addresses in the message (default `HERALD_WEBHOOK_ALLOW_PRIVATE`; push endpoints are checked the same
 * way, `HERALD_PUSH_ALLOW_PRIVATE`). Host names are resolved at every delivery instead
 * ({@link guardedLookup}), so a name that later points inward is refused then too. An IP literal is
 * never looked up, so a sender checks the URL again before each connection. Undefined when the URL is
 * fine.
 *
 * @example
 * ```ts
 * checkWebhookUrl('http://127.0.0.1:9000/hook', { allowPrivate: false }); // { kind: 'private', … }
 * ```
 */
export function checkWebhookUrl(
  raw: string,
  options: { allowPrivate: boolean; setting?: string },
): UrlProblem | undefined {
  // The URL parser drops tabs and newlines anywhere and control characters at either end: the URL
  // stored, shown and sent would not be the one checked.
  if (/\p{Cc}/u.test(raw)) {
    return { kind: 'invalid', message: 'must not contain control characters (U+0000-U+001F, U+007F-U+009F)' };
  }
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    // The one part the parser refuses that is told apart: a port beyond 65535.
    const port = /^https?:\/\/[^/?#]*:(\d+)(?:[/?#]|$)/i.exec(raw)?.[1];
    if (port !== undefined && Number(port) > 65535) {
      return { kind: 'invalid', message: `has port ${port}: a port is 1 to 65535` };
    }
    return { kind: 'invalid', message: 'is not an absolute URL (https://host/path)' };
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    return { kind: 'invalid', message: `must be http:// or https://, not ${url.protocol}//` };
  }
  if (url.username !== '' || url.password !== '') {
    return {
      kind: 'invalid',
      message: 'must not carry credentials (user:password@): the signature authenticates Herald',
    };
  }
  if (url.hash !== '') return { kind: 'invalid', message: 'must not have a #fragment' };
  if (url.port === '0') {
    return {
      kind: 'invalid',
      message:
        'has port 0, which nothing can listen on: give the port the receiver listens on, or none (443 for https, 80 for http)',
    };
  }
  if (options.allowPrivate) return undefined;
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  // A fully qualified name's trailing dot (`localhost.`) is the same host.
  const lower = host.toLowerCase().replace(/\.$/, '');
  if (
    lower === 'localhost' ||
    lower.endsWith('.localhost') ||
    (isIP(host) !== 0 && isNonPublicAddress(host))
  ) {
    return {
      kind: 'private',
      message: `points to a loopback or private address (${host}): refused unless the operator sets ${options.setting ?? 'HERALD_WEBHOOK_ALLOW_PRIVATE'}=true`,
    };
  }
  return undefined;
}

/** Thrown (through the connection) when a webhook or push host resolves to a non-public address. */
export class PrivateAddressError extends Error {
  constructor(host: string, address: string, setting = 'HERALD_WEBHOOK_ALLOW_PRIVATE') {
    super(`${host} resolves to ${address}, a non-public address: refused (${setting})`);
    this.name = 'PrivateAddressError';
  }
}

/**
 * A `lookup` for `http.request` that refuses non-public addresses: the check happens on the address the
 * socket then connects to, so DNS rebinding between a check and the connection cannot get past it. Its
 * refusal names `setting`, the variable that would allow the address (push endpoints have their own).
 */
export function guardedLookupFor(setting: string): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) {
        callback(error, '', 0);
        return;
      }
      const list = addresses as unknown as LookupAddress[];
      const refused = list.find((entry) => isNonPublicAddress(entry.address));
      if (refused !== undefined) {
        callback(new PrivateAddressError(hostname, refused.address, setting), '', 0);
        return;
      }
      if ((options as { all?: boolean }).all) {
        (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, list);
        return;
      }
      const first = list[0];
      if (first === undefined) callback(new Error(`${hostname} has no address`), '', 0);
      else callback(null, first.address, first.family);
    });
  };
}

/** {@link guardedLookupFor} of webhook deliveries (`HERALD_WEBHOOK_ALLOW_PRIVATE`). */
export const guardedLookup: LookupFunction = guardedLookupFor('HERALD_WEBHOOK_ALLOW_PRIVATE');
