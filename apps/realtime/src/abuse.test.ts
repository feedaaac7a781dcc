import { describe, expect, it } from 'vitest';
import { commandArgs } from './command-args.js';
import { loadConfig } from './config.js';

describe('commandArgs', () => {
  it('takes a lone callback as the acknowledgement, not as the body', () => {
    const ack = () => {};
    expect(commandArgs([ack])).toEqual([undefined, ack]);
    expect(commandArgs([{ upTo: '1-1' }, ack])).toEqual([{ upTo: '1-1' }, ack]);
    expect(commandArgs([{ ids: [] }])).toEqual([{ ids: [] }, undefined]);
    expect(commandArgs([])).toEqual([undefined, undefined]);
  });
});

/** The realtime server's required settings (production mode), then `extra`. */
const env = (extra: Record<string, string> = {}) => ({
  HERALD_JWT_SECRET: 'abuse-settings-secret-0123456789abcdef',
  ...extra,
});

describe('abuse settings', () => {
  it('defaults: trust no proxy; limits per socket, per user and per address', () => {
    expect(loadConfig(env()).abuse).toEqual({
      socketEvents: { burst: 1000, perSecond: 100 },
      userEvents: { burst: 2000, perSecond: 200 },
      refusedHandshakes: { burst: 30, perSecond: 1 },
      trustProxy: false,
      keyPrefix: 'ratelimit:',
    });
  });

  it('HERALD_TRUST_PROXY: true, false, a number of hops, or addresses and CIDRs', () => {
    const trust = (value: string) => loadConfig(env({ HERALD_TRUST_PROXY: value })).abuse.trustProxy;
    expect(trust('true')).toBe(true);
    expect(trust('false')).toBe(false);
    expect(trust('2')).toBe(2);
    expect(trust('loopback, 10.0.0.0/8')).toEqual(['loopback', '10.0.0.0/8']);
    expect(() => trust('10.0.0.300')).toThrow(/HERALD_TRUST_PROXY/);
  });

  it('refuses limits that are not positive numbers', () => {
    expect(() => loadConfig(env({ HERALD_SOCKET_EVENTS_BURST: '0' }))).toThrow(/HERALD_SOCKET_EVENTS_BURST/);
    expect(() => loadConfig(env({ HERALD_USER_EVENTS_PER_SECOND: '0' }))).toThrow(
      /HERALD_USER_EVENTS_PER_SECOND/,
    );
    expect(() => loadConfig(env({ HERALD_RATE_LIMIT_PREFIX: 'a{b' }))).toThrow(/HERALD_RATE_LIMIT_PREFIX/);
  });
});
