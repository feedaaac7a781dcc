import type { Cluster, Redis } from 'ioredis';
import {
  type FailureOptions,
  type RateLimitDecision,
  RateLimiter,
  type RateLimiterLogger,
  type RateLimitResult,
} from './rate-limiter.js';

/**
 * Settings of one {@link TokenBucket}.
 *
 * @example
 * ```ts
 * const options: TokenBucketOptions = { redis, capacity: 10, ratePerSecond: 10 };
 * ```
 */
export interface TokenBucketOptions {
  /** ioredis client (single node or Cluster) that holds the buckets. */
  redis: Redis | Cluster;
  /** Most tokens a bucket holds: the largest burst. */
  capacity: number;
  /** Tokens added per second, continuously. */
  ratePerSecond: number;
  /** Prefix of every key; the id follows inside a `{hash tag}`. Default `ratelimit:` → `ratelimit:{<id>}`. */
  keyPrefix?: string;
  /** Default `{ mode: 'throw' }`: Redis failures throw `RateLimiterUnavailableError`, as before. */
  failure?: FailureOptions;
  /** Default `{ max: 10_000 }`; `false` turns the local deny cache off. */
  denyCache?: false | { max?: number };
  /** Name of the policy in results and metrics. Default `default`. */
  name?: string;
  logger?: RateLimiterLogger;
  onDecision?: (result: RateLimitResult) => void;
  /** Tests only: a clock in milliseconds. Production uses Redis `TIME`, which every instance shares. */
  clock?: () => number;
}

/**
 * A single-policy token bucket shared by every process that talks to the same Redis: refills
 * continuously at `ratePerSecond` up to `capacity`; each call takes `cost` tokens atomically or none.
 * The key of id `x` is `<keyPrefix>{x}` (default `ratelimit:{x}`). A thin wrapper over
 * {@link RateLimiter}, which also does several policies at once.
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
  /** The underlying limiter (metrics, peek, the Fastify plugin). */
  readonly limiter: RateLimiter;
  readonly #name: string;

  constructor(options: TokenBucketOptions) {
    this.capacity = options.capacity;
    this.ratePerSecond = options.ratePerSecond;
    this.#name = options.name ?? 'default';
    this.limiter = new RateLimiter({
      redis: options.redis,
      policies: [
        {
          name: this.#name,
          capacity: options.capacity,
          ratePerSecond: options.ratePerSecond,
          keyPrefix: options.keyPrefix ?? 'ratelimit:',
        },
      ],
      failure: { mode: 'throw', ...options.failure },
      ...(options.denyCache === undefined ? {} : { denyCache: options.denyCache }),
      ...(options.logger === undefined ? {} : { logger: options.logger }),
      ...(options.onDecision === undefined ? {} : { onDecision: options.onDecision }),
      ...(options.clock === undefined ? {} : { clock: options.clock }),
    });
  }

  /**
   * The Redis key of `id`'s bucket.
   *
   * @example
   * ```ts
   * limiter.keyOf('user-42'); // 'ratelimit:{user-42}'
   * ```
   */
  keyOf(id: string): string {
    return this.limiter.keyOf(this.#name, id);
  }

  /**
   * Takes `cost` tokens from `id`'s bucket if they are all there.
   *
   * @throws {CostExceedsCapacityError} when `cost > capacity`
   * @example
   * ```ts
   * const { allowed, retryAfterMs } = await limiter.consume('user-42');
   * ```
   */
  consume(id: string, cost = 1): Promise<RateLimitResult> {
    return this.limiter.consume(id, cost);
  }

  /**
   * `id`'s bucket without taking anything.
   *
   * @example
   * ```ts
   * const { remaining } = await limiter.peek('user-42');
   * ```
   */
  peek(id: string): Promise<RateLimitDecision> {
    return this.limiter.peek(id);
  }

  /**
   * Refills `id`'s bucket (deletes its key).
   *
   * @example
   * ```ts
   * await limiter.reset('user-42');
   * ```
   */
  reset(id: string): Promise<void> {
    return this.limiter.reset(id);
  }
}
