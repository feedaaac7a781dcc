import type { Cluster, Redis } from 'ioredis';
import { loadLua } from './lua.js';

/** Name under which the token-bucket script is registered with `defineCommand`. */
const COMMAND = 'heraldTokenBucket';
const TTL_MARGIN_MS = 1000;

type TokenBucketReply = [allowed: number, remaining: number, retryAfterMs: number, resetAfterMs: number];

interface WithTokenBucket {
  heraldTokenBucket(
    key: string,
    capacity: number,
    rate: number,
    cost: number,
    nowMicros: string,
    ttlMarginMs: number,
  ): Promise<TokenBucketReply>;
}

/** Settings of one token bucket limiter. */
export interface TokenBucketOptions {
  /** ioredis client (single node or Cluster) that holds the buckets. */
  redis: Redis | Cluster;
  /** Most tokens a bucket holds: the largest burst. */
  capacity: number;
  /** Tokens added per second, continuously. */
  ratePerSecond: number;
  /** Prefix of every key; the id follows inside a `{hash tag}`. Default `ratelimit:`. */
  keyPrefix?: string;
  /** Tests only: a clock in milliseconds. Production uses Redis `TIME`, which every instance shares. */
  clock?: () => number;
}

/** The outcome of one `consume` call. */
export interface RateLimitDecision {
  allowed: boolean;
  /** Capacity of the bucket. */
  limit: number;
  /** Whole tokens left after this call. */
  remaining: number;
  /** When denied: milliseconds until `cost` tokens are there. 0 when allowed. */
  retryAfterMs: number;
  /** Milliseconds until the bucket is full again. */
  resetAfterMs: number;
}

/**
 * A token bucket shared by every process that talks to the same Redis: refills continuously at
 * `ratePerSecond` up to `capacity`; each call takes `cost` tokens atomically or none.
 *
 * @example
 * ```ts
 * const limiter = new TokenBucket({ redis, capacity: 10, ratePerSecond: 10 });
 * const decision = await limiter.consume('user-42');
 * if (!decision.allowed) reply.code(429).header('Retry-After', Math.ceil(decision.retryAfterMs / 1000));
 * ```
 */
export class TokenBucket {
  readonly capacity: number;
  readonly ratePerSecond: number;
  readonly #redis: Redis | Cluster;
  readonly #keyPrefix: string;
  readonly #clock: (() => number) | undefined;

  constructor(options: TokenBucketOptions) {
    if (!(options.capacity > 0) || !(options.ratePerSecond > 0)) {
      throw new RangeError('TokenBucket: capacity and ratePerSecond must be positive numbers');
    }
    this.capacity = options.capacity;
    this.ratePerSecond = options.ratePerSecond;
    this.#redis = options.redis;
    this.#keyPrefix = options.keyPrefix ?? 'ratelimit:';
    this.#clock = options.clock;
    if (!(COMMAND in this.#redis)) {
      this.#redis.defineCommand(COMMAND, { numberOfKeys: 1, lua: loadLua('token-bucket-1.lua') });
    }
  }

  /** The Redis key of `id`'s bucket. */
  keyOf(id: string): string {
    return `${this.#keyPrefix}{${id}}`;
  }

  /**
   * Takes `cost` tokens from `id`'s bucket if they are all there.
   *
   * @example
   * ```ts
   * const { allowed, retryAfterMs } = await limiter.consume('user-42');
   * ```
   */
  async consume(id: string, cost = 1): Promise<RateLimitDecision> {
    const now = this.#clock ? String(Math.round(this.#clock() * 1000)) : '';
    const [allowed, remaining, retryAfterMs, resetAfterMs] = await (
      this.#redis as unknown as WithTokenBucket
    ).heraldTokenBucket(this.keyOf(id), this.capacity, this.ratePerSecond, cost, now, TTL_MARGIN_MS);
    return { allowed: allowed === 1, limit: this.capacity, remaining, retryAfterMs, resetAfterMs };
  }
}
