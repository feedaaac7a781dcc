import { TokenBucket } from '@herald/rate-limiter';
import type { FastifyBaseLogger } from 'fastify';
import type { Redis } from 'ioredis';
import type { ApiKeyIdentity } from './api-keys.js';
import type { GatewayConfig } from './config.js';
import type { GatewayMetrics } from './metrics.js';

/** The outcome of checking one request against every limit that applies to it. */
export interface LimitCheck {
  allowed: boolean;
  /** The policy that refused (`sender` or `recipient`). */
  policy?: string;
  retryAfterMs: number;
  /** Headers to send with the answer. */
  headers: Record<string, string>;
}

/** The gateway's limits: per API key (sender) and per recipient `userId`, taken in one decision. */
export class Limits {
  readonly #recipient: TokenBucket;

  constructor(redis: Redis, config: GatewayConfig, _metrics: GatewayMetrics, _log: FastifyBaseLogger) {
    this.#recipient = new TokenBucket({
      redis,
      capacity: config.rateLimit.burst,
      ratePerSecond: config.rateLimit.perSecond,
      keyPrefix: config.rateLimit.keyPrefix,
    });
  }

  async check(_identity: ApiKeyIdentity, perRecipient: ReadonlyMap<string, number>): Promise<LimitCheck> {
    for (const [userId, cost] of perRecipient) {
      const decision = await this.#recipient.consume(userId, cost);
      if (!decision.allowed) {
        return { allowed: false, policy: 'recipient', retryAfterMs: decision.retryAfterMs, headers: {} };
      }
    }
    return { allowed: true, retryAfterMs: 0, headers: {} };
  }
}
