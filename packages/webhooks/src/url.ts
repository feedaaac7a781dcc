import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';

/**
 * Addresses a webhook may not reach unless the operator allows it (`HERALD_WEBHOOK_ALLOW_PRIVATE`,
 * `HERALD_DEV_MODE`): loopback, private, carrier-grade NAT, link-local (cloud metadata at
 * 169.254.169.254), benchmarking, multicast, reserved and unspecified ranges, IPv4 and IPv6
 * (IPv4-mapped IPv6 is checked as the IPv4 inside). A tenant's URL must never reach Herald's own Redis
 * or the operator's network (SSRF).
 */
const NON_PUBLIC = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  NON_PUBLIC.addSubnet(network, prefix, 'ipv4');
}
for (const [network, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['64:ff9b:1::', 48],
  ['100::', 64],
  ['2001:db8::', 32],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const) {
  NON_PUBLIC.addSubnet(network, prefix, 'ipv6');
}

/**
 * True when `address` (an IP literal) is not a public internet address.
 *
 * @example
 * ```ts
 * isNonPublicAddress('10.1.2.3');        // true
 * isNonPublicAddress('::ffff:127.0.0.1'); // true
 * isNonPublicAddress('93.184.216.34');   // false
 * ```
 */
export function isNonPublicAddress(address: string): boolean {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1];
  if (mapped !== undefined) return NON_PUBLIC.check(mapped, 'ipv4');
  const family = isIP(address);
  if (family === 0) return true;
  return NON_PUBLIC.check(address, family === 4 ? 'ipv4' : 'ipv6');
}

/** Why a webhook URL is refused: `invalid` (not a usable URL) or `private` (a non-public address). */
export interface UrlProblem {
  kind: 'invalid' | 'private';
  message: string;
}

/**
 * Checks a webhook URL before it is stored: absolute `http:`/`https:`, no credentials, no fragment, and
 * (unless `allowPrivate`) a host that is not a non-public IP literal or `localhost`. `setting` names the
 * variable that allows private addresses in the message (default `HERALD_WEBHOOK_ALLOW_PRIVATE`; push
 * endpoints are checked the same way, `HERALD_PUSH_ALLOW_PRIVATE`). Host names are
 * resolved at every delivery instead ({@link guardedLookup}), so a name that later points inward is
 * refused then too. Undefined when the URL is fine.
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
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
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
  if (options.allowPrivate) return undefined;
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const lower = host.toLowerCase();
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

/** Thrown (through the connection) when a webhook host resolves to a non-public address. */
export class PrivateAddressError extends Error {
  constructor(host: string, address: string) {
    super(`${host} resolves to ${address}, a non-public address: refused (HERALD_WEBHOOK_ALLOW_PRIVATE)`);
    this.name = 'PrivateAddressError';
  }
}

/**
 * A `lookup` for `http.request` that refuses non-public addresses: the check happens on the address the
 * socket then connects to, so DNS rebinding between a check and the connection cannot get past it.
 */
export const guardedLookup: LookupFunction = (hostname, options, callback) => {
  dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
    if (error) {
      callback(error, '', 0);
      return;
    }
    const list = addresses as unknown as LookupAddress[];
    const refused = list.find((entry) => isNonPublicAddress(entry.address));
    if (refused !== undefined) {
      callback(new PrivateAddressError(hostname, refused.address), '', 0);
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
