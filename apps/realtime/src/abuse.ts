import type { IncomingMessage } from 'node:http';
import proxyAddr from '@fastify/proxy-addr';
import { connectionErrorLog, createRedis } from '@herald/config';
import { MAX_PAGE } from '@herald/inbox';
import { type CommandReply, ErrorCode } from '@herald/protocol';
import { RateLimiter, type RateLimitResult } from '@herald/rate-limiter';
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Event as SocketPacket } from 'socket.io';

/** `code` of every refusal for being over an abuse limit: command replies and handshake `connect_error`s. */
export const RATE_LIMITED = ErrorCode.RATE_LIMITED;

/** Policy names, as they appear in the limiter's metrics and keys. */
export const AbusePolicy = {
  SOCKET_EVENTS: 'socket-events',
  USER_EVENTS: 'user-events',
  REFUSED_HANDSHAKES: 'refused-handshakes',
} as const;

/** A bucket: bursts of `burst`, `perSecond` sustained. */
export interface BucketSettings {
  burst: number;
  perSecond: number;
}

/**
 * Which proxies' `X-Forwarded-For` to believe for the client address: `false` (the TCP peer is the
 * client), `true` (every hop: the left-most address), a number of hops, or addresses / CIDRs /
 * `loopback` / `linklocal` / `uniquelocal` (as Fastify's and Express's `trustProxy`).
 */
export type TrustProxy = boolean | number | readonly string[];

/** The realtime server's abuse limits (`HERALD_*_EVENTS_*`, `HERALD_REFUSED_HANDSHAKES_*`, `HERALD_TRUST_PROXY`). */
export interface AbuseSettings {
  /** Client events (`ack`, `read`, `read-all`, any other) per socket. */
  socketEvents: BucketSettings;
  /** Client events per user, all its sockets on every instance together. */
  userEvents: BucketSettings;
  /** Refused handshakes (missing or bad token, bad `lastOffset`) per client address. */
  refusedHandshakes: BucketSettings;
  trustProxy: TrustProxy;
  /** Prefix of the limiter keys (`HERALD_RATE_LIMIT_PREFIX`, shared with the gateway). */
  keyPrefix: string;
}

/** What a client over a limit is told. */
export interface RateLimited {
  error: string;
  retryAfterMs: number;
}

// A decision that takes longer is taken as allowed (failure mode `open`): the commands themselves need
// Redis and answer HERALD_ERR_UNAVAILABLE then, so a second refusal would only hide the real cause.
const LIMITER_TIMEOUT_MS = 150;

/**
 * The realtime server's abuse limits, on `@herald/rate-limiter` (Redis, so per-user limits hold across
 * instances): client events per socket and per user, and refused handshakes per client address.
 */
export class AbuseLimits {
  readonly #redis: Redis | Cluster;
  readonly #events: RateLimiter;
  readonly #handshakes: RateLimiter;
  readonly #trust: (address: string, hop: number) => boolean;
  /** The most one event may cost: the smaller burst (a dearer event would never pass). */
  readonly #maxCost: number;

  constructor(
    connection: { redisUrl: string; redisClusterNodes: { host: string; port: number }[] | undefined },
    settings: AbuseSettings,
    log: Logger,
  ) {
    // Its own connection, as the limiter wants it: fail fast, never replay a consume late.
    this.#redis = createRedis(
      { url: connection.redisUrl, clusterNodes: connection.redisClusterNodes },
      'producer',
    );
    this.#redis.on('error', connectionErrorLog(log, 'redis (abuse limits) connection error'));
    const logger = {
      warn: (details: Record<string, unknown>, message: string) => log.warn(details, message),
    };
    const failure = { mode: 'open', timeoutMs: LIMITER_TIMEOUT_MS } as const;
    this.#events = new RateLimiter({
      redis: this.#redis,
      policies: [
        policy(AbusePolicy.SOCKET_EVENTS, settings.socketEvents, settings.keyPrefix),
        policy(AbusePolicy.USER_EVENTS, settings.userEvents, settings.keyPrefix),
      ],
      // Redis Cluster: both buckets of a call in the user's slot.
      ...(connection.redisClusterNodes
        ? { hashTag: (ids: Readonly<Record<string, string>>) => ids[AbusePolicy.USER_EVENTS] ?? '' }
        : {}),
      failure,
      logger,
    });
    this.#handshakes = new RateLimiter({
      redis: this.#redis,
      policies: [policy(AbusePolicy.REFUSED_HANDSHAKES, settings.refusedHandshakes, settings.keyPrefix)],
      failure,
      logger,
    });
    this.#trust = trustFunction(settings.trustProxy);
    this.#maxCost = Math.min(settings.socketEvents.burst, settings.userEvents.burst);
  }

  /**
   * The client's address: the TCP peer, or with `HERALD_TRUST_PROXY` the address the trusted proxies
   * name in `X-Forwarded-For`.
   */
  clientAddress(request: IncomingMessage, peer: string): string {
    // `peer`: the address Engine.IO read when the connection opened, for a request whose TCP socket
    // is already gone (then Node no longer knows the peer).
    try {
      return proxyAddr(request, this.#trust) || peer;
    } catch {
      return peer;
    }
  }

  /**
   * Per-socket middleware (`socket.use`): every client event costs one from the socket's and the
   * user's buckets, a `list` one per {@link LIST_ITEMS_PER_EVENT} items it asks for (a page of 1,000
   * reads 1,000 entries and their records: 20); over either, the event is dropped and its
   * acknowledgement (if any) answered `{ ok: false, code: 'HERALD_ERR_RATE_LIMITED', error, retryAfterMs }`.
   */
  events(userKey: string, socketId: string): (packet: SocketPacket, next: (error?: Error) => void) => void {
    const ids = { [AbusePolicy.SOCKET_EVENTS]: socketId, [AbusePolicy.USER_EVENTS]: userKey };
    return (packet, next) => {
      this.#events.consume(ids, Math.min(eventCost(packet), this.#maxCost)).then(
        (result) => {
          if (result.allowed) {
            next();
            return;
          }
          const ack: unknown = packet.at(-1);
          if (typeof ack === 'function') {
            const reply: CommandReply = { ok: false, code: RATE_LIMITED, ...eventsLimited(result) };
            ack(reply);
          }
        },
        () => next(), // only for an invalid key, which these are not
      );
    };
  }

  /**
   * Asked before the token is checked: while `address` is over its refused-handshake limit (in this
   * process's deny cache), every handshake from it is refused without further work.
   */
  handshakeDenied(address: string): RateLimited | undefined {
    const denied = this.#handshakes.deniedLocally({ [AbusePolicy.REFUSED_HANDSHAKES]: address });
    return denied ? handshakesLimited(denied) : undefined;
  }

  /** Counts one refused handshake of `address`; over the limit, what to answer instead of the refusal. */
  async refusedHandshake(address: string): Promise<RateLimited | undefined> {
    const result = await this.#handshakes.consume({ [AbusePolicy.REFUSED_HANDSHAKES]: address });
    return result.allowed ? undefined : handshakesLimited(result);
  }

  close(): void {
    this.#redis.disconnect();
  }
}

/** Items of a `list` page that cost one event: the default page (50) costs one, a page of 1,000 costs 20. */
export const LIST_ITEMS_PER_EVENT = 50;

/** What a client event costs from its budgets: one, a `list` one per {@link LIST_ITEMS_PER_EVENT} items. */
function eventCost(packet: SocketPacket): number {
  if (packet[0] !== 'list') return 1;
  const limit = (packet[1] as { limit?: unknown } | null | undefined)?.limit;
  // What `list` would refuse costs one: it reads nothing.
  return Number.isInteger(limit) && (limit as number) >= 1 && (limit as number) <= MAX_PAGE
    ? Math.ceil((limit as number) / LIST_ITEMS_PER_EVENT)
    : 1;
}

function policy(name: string, bucket: BucketSettings, keyPrefix: string) {
  return { name, capacity: bucket.burst, ratePerSecond: bucket.perSecond, keyPrefix: `${keyPrefix}${name}:` };
}

function eventsLimited(result: RateLimitResult): RateLimited {
  const whose = result.policy === AbusePolicy.SOCKET_EVENTS ? 'this connection' : 'this user';
  return {
    error: `Too many events from ${whose}: retry in ${result.retryAfterMs} ms, and acknowledge or mark read in batches (up to 1000 ids per event).`,
    retryAfterMs: result.retryAfterMs,
  };
}

function handshakesLimited(result: RateLimitResult): RateLimited {
  return {
    error: `Too many refused handshakes from this address: retry in ${result.retryAfterMs} ms with a valid token from POST /tokens.`,
    retryAfterMs: result.retryAfterMs,
  };
}

function trustFunction(trust: TrustProxy): (address: string, hop: number) => boolean {
  if (trust === true) return () => true;
  if (trust === false) return () => false;
  if (typeof trust === 'number') return (_address, hop) => hop < trust;
  return proxyAddr.compile([...trust]);
}

/**
 * Parses `HERALD_TRUST_PROXY`: `false` / `true`, a number of hops, or a comma-separated list of
 * addresses, CIDRs and `loopback` / `linklocal` / `uniquelocal`. Throws on an address it cannot read.
 */
export function parseTrustProxy(value: string): TrustProxy {
  const text = value.trim();
  if (text === 'false') return false;
  if (text === 'true') return true;
  if (/^\d+$/.test(text)) return Number(text);
  const list = text
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry.length > 0);
  proxyAddr.compile(list); // throws "invalid IP address: …"
  return Object.freeze(list);
}
