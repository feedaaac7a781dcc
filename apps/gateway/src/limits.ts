import { isOutOfMemory } from '@herald/config';
import {
  type PolicyCounters,
  type PolicyOptions,
  RateLimiter,
  type RateLimitResult,
} from '@herald/rate-limiter';
import type { RateLimitRouteConfig } from '@herald/rate-limiter/fastify';
import type { FastifyBaseLogger, FastifyRequest } from 'fastify';
import type { Cluster, Redis } from 'ioredis';
import type { ApiKeyIdentity } from './api-keys.js';
import type { GatewayConfig } from './config.js';

/** Policy names, as they appear in `RateLimit-Policy`, in 429 bodies and in metrics. */
export const SENDER_POLICY = 'sender';
export const RECIPIENT_POLICY = 'recipient';
/** Per API key: `POST /tokens`. */
export const TOKENS_POLICY = 'tokens';
/** Per API key: the inbox routes (`GET /users/:userId/notifications`, `POST …/read`). */
export const INBOX_POLICY = 'inbox';
/** The policies of one bucket per API key, besides `sender`. */
export type ApiKeyPolicy = typeof TOKENS_POLICY | typeof INBOX_POLICY;

/**
 * The gateway's limits: per API key (`sender`) and per recipient `userId` (`recipient`), both taken
 * in one atomic decision. API keys may carry their own limits, so there is one limiter per distinct
 * set of limits (a handful in practice); they share Redis keys, so a key's buckets are the same
 * whichever limiter reads them.
 */
export class Limits {
  readonly #redis: Redis | Cluster;
  readonly #config: GatewayConfig;
  readonly #log: FastifyBaseLogger;
  readonly #limiters = new Map<string, RateLimiter>();
  readonly #byIdentity = new WeakMap<ApiKeyIdentity, RateLimiter>();
  readonly #onDecision: ((result: RateLimitResult) => void) | undefined;
  /** On Redis Cluster: the `sender` + `recipient` limiters are one per tenant, tagged by it. */
  readonly #cluster: boolean;
  /** The `batchSchedule` of the sender + recipient limiters (the gateway's gathering), if any. */
  readonly #schedule: ((send: () => Promise<void>) => void) | undefined;

  /**
   * `onDecision` sees every decision of every limiter (the admin API's per-second tally); `schedule`
   * is the sender + recipient limiters' `batchSchedule` (when their decisions go: see Gathering).
   */
  constructor(
    redis: Redis | Cluster,
    config: GatewayConfig,
    log: FastifyBaseLogger,
    onDecision?: (result: RateLimitResult) => void,
    schedule?: (send: () => Promise<void>) => void,
  ) {
    this.#schedule = schedule;
    this.#redis = redis;
    this.#config = config;
    this.#log = log;
    this.#onDecision = onDecision;
    this.#cluster = config.redisClusterNodes !== undefined;
  }

  /** The limiter of the gateway's default limits (for routes that name none). */
  defaults(): RateLimiter {
    return this.forTenant('');
  }

  /** The limiter of the gateway's default limits for `tenantId`'s keys and users (the admin's peek). */
  forTenant(tenantId: string): RateLimiter {
    return this.for({ id: '', name: '', tenantId, limits: {} });
  }

  /**
   * `config.rateLimit` of a route limited per API key by `policy` (one token per request). A key being
   * denied is answered 429 before its body is read (`precheck`), as `/notify` does.
   *
   * @example
   * ```ts
   * app.post('/tokens', { onRequest: app.authenticate, config: { rateLimit: app.limits.perApiKey(TOKENS_POLICY) } }, handler);
   * ```
   */
  perApiKey(policy: ApiKeyPolicy): RateLimitRouteConfig {
    const limiter = this.#perApiKey(policy);
    const key = (request: FastifyRequest) => ({ [policy]: request.identity.id });
    return { limiter, key, precheck: key, passWhenUnavailable: readWhileFull };
  }

  #perApiKey(policy: ApiKeyPolicy): RateLimiter {
    let limiter = this.#limiters.get(policy);
    if (limiter === undefined) {
      const defaults = this.#config.rateLimit;
      const bucket = policy === TOKENS_POLICY ? defaults.tokens : defaults.inbox;
      // ratelimit:tokens:{<api key id>}, ratelimit:inbox:{<api key id>}
      limiter = this.#limiter([
        {
          name: policy,
          capacity: bucket.burst,
          ratePerSecond: bucket.perSecond,
          keyPrefix: `${defaults.keyPrefix}${policy}:`,
        },
      ]);
      // The map's other ids are `<burst>/<rate>/…`: no clash.
      this.#limiters.set(policy, limiter);
    }
    return limiter;
  }

  /** The limiter for `identity`'s limits (its own, else the gateway's defaults). */
  for(identity: ApiKeyIdentity): RateLimiter {
    // Identities are long-lived objects (environment keys, the key cache): one lookup per request.
    let limiter = this.#byIdentity.get(identity);
    if (limiter === undefined) {
      limiter = this.#forLimits(identity);
      this.#byIdentity.set(identity, limiter);
    }
    return limiter;
  }

  /**
   * The sender policy of `identity` (its own limits, else the defaults): what a topic send pays from,
   * one token per recipient (the gateway takes the first, the worker the rest, on these very keys).
   */
  senderPolicy(
    identity: ApiKeyIdentity,
  ): PolicyOptions & { capacity: number; keyPrefix: string; hashTag?: string } {
    const defaults = this.#config.rateLimit;
    const hashTag = this.#hashTagOf(identity);
    return {
      name: SENDER_POLICY,
      capacity: identity.limits.senderBurst ?? defaults.senderBurst,
      ratePerSecond: identity.limits.senderPerSecond ?? defaults.senderPerSecond,
      // ratelimit:sender:{<api key id>} (on Cluster ratelimit:sender:{<tenant>}:<api key id>)
      keyPrefix: `${defaults.keyPrefix}sender:`,
      ...(hashTag === undefined ? {} : { hashTag }),
    };
  }

  /** The limiter of `identity`'s sender policy alone (a topic send, which has no one recipient). */
  senderOnly(identity: ApiKeyIdentity): RateLimiter {
    const { hashTag, ...sender } = this.senderPolicy(identity);
    const id = `sender/${sender.capacity}/${sender.ratePerSecond}${hashTag === undefined ? '' : `@${hashTag}`}`;
    let limiter = this.#limiters.get(id);
    if (limiter === undefined) {
      limiter = this.#limiter([sender], hashTag);
      this.#limiters.set(id, limiter);
    }
    return limiter;
  }

  /** On Redis Cluster: the hash tag of `identity`'s buckets (its tenant); undefined on a single Redis. */
  #hashTagOf(identity: ApiKeyIdentity): string | undefined {
    return this.#cluster ? identity.tenantId : undefined;
  }

  #forLimits(identity: ApiKeyIdentity): RateLimiter {
    const defaults = this.#config.rateLimit;
    const { hashTag: _tag, ...sender } = this.senderPolicy(identity);
    const recipientBurst = identity.limits.recipientBurst ?? defaults.burst;
    const recipientRate = identity.limits.recipientPerSecond ?? defaults.perSecond;
    // On Redis Cluster the keys of one decision (the sender's bucket, every recipient's) must share a
    // slot, so they carry the tenant as hash tag: `ratelimit:sender:{<tenant>}:<api key id>`,
    // `ratelimit:{<tenant>}:<tenant>/<user>`. A tenant's decisions then all go to one master, which the
    // sender's bucket (one key, in every decision of its API key) already asks of one master. Rather
    // than one call per slot (two round trips, and a sender charged for a recipient then refused: not
    // atomic). One limiter per tenant, each with its own deny cache. On a single Redis the keys, the
    // scripts and their cost are unchanged (no tag).
    const tenant = this.#hashTagOf(identity);
    const id = `${sender.capacity}/${sender.ratePerSecond}/${recipientBurst}/${recipientRate}${tenant === undefined ? '' : `@${tenant}`}`;
    let limiter = this.#limiters.get(id);
    if (limiter === undefined) {
      limiter = this.#limiter(
        [
          sender,
          // ratelimit:{<userId>}: the walking skeleton's key, unchanged, for the deployment's recipient
          // limits. A key with limits of its own has buckets of its own, one per user and limit set
          // (ratelimit:recipient-<burst>-<rate>:{…}), shared by the tenant's keys with the same limits:
          // one bucket taken with each key's burst and rate in turn let a stricter key (burst 3) leave
          // every other key of the tenant 3 tokens, then 0, for that user.
          {
            name: RECIPIENT_POLICY,
            capacity: recipientBurst,
            ratePerSecond: recipientRate,
            keyPrefix:
              recipientBurst === defaults.burst && recipientRate === defaults.perSecond
                ? defaults.keyPrefix
                : `${defaults.keyPrefix}recipient-${recipientBurst}-${recipientRate}:`,
          },
        ],
        tenant,
        this.#schedule,
      );
      this.#limiters.set(id, limiter);
    }
    return limiter;
  }

  /** A limiter of `policies` with the gateway's failure mode, logger and decision tally (and `hashTag`). */
  #limiter(
    policies: PolicyOptions[],
    hashTag?: string,
    batchSchedule?: (send: () => Promise<void>) => void,
  ): RateLimiter {
    const defaults = this.#config.rateLimit;
    return new RateLimiter({
      redis: this.#redis,
      policies,
      failure: {
        mode: defaults.failure,
        timeoutMs: defaults.timeoutMs,
        expectedInstances: defaults.expectedInstances,
      },
      logger: this.#log,
      ...(hashTag === undefined ? {} : { hashTag }),
      // Gathered, a batch goes whole when its gathering goes: a pool of 50 waiting requests is then one
      // decision call and one envelope, not a batch every 16 (the default) and an envelope per batch.
      ...(batchSchedule === undefined ? {} : { batchSchedule, batchFlushAt: 100 }),
      ...(this.#onDecision ? { onDecision: this.#onDecision } : {}),
    });
  }

  /**
   * Decisions so far per policy, summed over every limiter (one per distinct set of limits): what
   * `/metrics` reports as `herald_ratelimit_decisions_total`.
   */
  totals(): Record<string, PolicyCounters> {
    const totals: Record<string, PolicyCounters> = {};
    for (const limiter of this.#limiters.values()) {
      for (const [policy, counters] of Object.entries(limiter.metrics())) {
        const total = totals[policy] ?? { allowed: 0, denied: 0, deniedLocally: 0, fallback: 0 };
        totals[policy] = total;
        total.allowed += counters.allowed;
        total.denied += counters.denied;
        total.deniedLocally += counters.deniedLocally;
        total.fallback += counters.fallback;
      }
    }
    return totals;
  }
}

/**
 * A read (GET) whose bucket Redis refused to write for memory (at maxmemory with noeviction) passes:
 * what is stored can still be read meanwhile, as the docs say, whatever the failure mode.
 */
function readWhileFull(request: FastifyRequest, result: RateLimitResult): boolean {
  return request.method === 'GET' && isOutOfMemory(result.fallback?.cause);
}
