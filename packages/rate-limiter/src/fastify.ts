import { ERRORS, ErrorCode } from '@herald/protocol/error-codes';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { RateLimitCost, RateLimiter, RateLimitKey, RateLimitResult } from './rate-limiter.js';

/**
 * Per-route settings, given as the route's `config.rateLimit`.
 *
 * @example
 * ```ts
 * app.post('/notify', {
 *   config: {
 *     rateLimit: {
 *       key: (request) => ({ apiKey: request.apiKeyId, recipient: (request.body as { userId: string }).userId }),
 *       cost: () => 1,
 *     },
 *   },
 * }, handler);
 * // A batch, with a limiter chosen per API key: one token per notification from the sender and from
 * // each recipient, all or nothing.
 * app.post('/notify/batch', {
 *   config: {
 *     rateLimit: {
 *       limiter: (request) => limiters.for(request.apiKeyId),
 *       key: (request) => ({ sender: request.apiKeyId, recipient: batchOf(request).map((n) => n.userId) }),
 *       cost: (request) => ({ sender: batchOf(request).length, recipient: 1 }),
 *     },
 *   },
 * }, handler);
 * ```
 */
export interface RateLimitRouteConfig {
  /**
   * The limiter of this route, or a function that picks one per request (e.g. per API key, when keys
   * carry their own limits; it runs after `hook`'s earlier hooks, so it can read the authenticated
   * identity). Default: the plugin's `limiter`.
   */
  limiter?: RateLimiter | ((request: FastifyRequest) => RateLimiter | Promise<RateLimiter>);
  /** The ids of the call: one string for every policy, or one per policy name. */
  key: (request: FastifyRequest) => RateLimitKey | Promise<RateLimitKey>;
  /** The cost of the call. Default 1. */
  cost?: (request: FastifyRequest) => RateLimitCost | Promise<RateLimitCost>;
  /**
   * Ids known before the body is read (e.g. the authenticated API key's), looked up in the limiter's
   * local deny cache in `preParsing` (the route's first `preParsing` hook): while one of them is denied,
   * the request is answered 429 there, before its body is read, parsed or validated, and before the
   * route's own `preParsing` hooks run, so a flood from a denied caller costs the least it
   * can and makes no Redis call. Return `undefined` to skip. The full decision still runs later. Set up
   * when the route is declared: declare such routes after registering the plugin.
   */
  precheck?: (request: FastifyRequest) => Readonly<Record<string, string>> | undefined;
  /**
   * A call the failure mode denied (Redis away or refusing: `result.source === 'fallback'`) passes
   * instead when this answers true: e.g. a read while Redis refuses writes for memory, which the bucket's
   * write cannot take but the read can. Default: none passes.
   */
  passWhenUnavailable?: (request: FastifyRequest, result: RateLimitResult) => boolean;
}

/**
 * Options of {@link heraldRateLimit}.
 *
 * @example
 * ```ts
 * await app.register(heraldRateLimit, { limiter, hook: 'preHandler' });
 * ```
 */
export interface HeraldRateLimitOptions {
  /** The default limiter of routes whose `config.rateLimit` names none. */
  limiter: RateLimiter;
  /**
   * The hook that runs the limiter. Default `preHandler` (after authentication and body validation, so
   * `key` and `cost` can read the body; a rejected body costs nothing).
   */
  hook?: 'onRequest' | 'preValidation' | 'preHandler';
  /**
   * Answers a denied call itself, instead of the plugin throwing a {@link RateLimitedError} for the
   * app's error handler: `reply` already carries the `RateLimit-Policy` and `RateLimit` headers; the
   * function sends the answer (status, `Retry-After`, body). For apps whose error handler owns the error
   * JSON, pass the same function it uses for a thrown `RateLimitedError`: a denied flood then costs no
   * Error object, no rejected promise and no trip through Fastify's error path.
   */
  onDenied?: (reply: FastifyReply, error: RateLimitedError) => void;
}

/**
 * A denied decision, thrown by {@link heraldRateLimit}'s hooks for the app's error handler to answer:
 * `statusCode` 429, or 503 when the limiter's Redis was away and the failure mode denied
 * (`result.source === 'fallback'`). The `RateLimit-Policy` and `RateLimit` headers are already on the
 * reply; answer with `Retry-After: retryAfterSeconds`. No stack trace: a denial is not a defect, and a
 * denied flood must stay cheap.
 *
 * @example
 * ```ts
 * app.setErrorHandler((error, _request, reply) => {
 *   if (error instanceof RateLimitedError) {
 *     return reply.code(error.statusCode).header('Retry-After', String(error.retryAfterSeconds))
 *       .send({ error: error.message, code: error.code, policy: error.result.policy, retryAfterMs: error.result.retryAfterMs });
 *   }
 *   throw error;
 * });
 * ```
 */
export class RateLimitedError extends Error {
  readonly code = ErrorCode.RATE_LIMITED;
  readonly statusCode: 429 | 503;
  readonly result: RateLimitResult;
  /** `Retry-After`: whole seconds, rounded up, at least 1. */
  readonly retryAfterSeconds: number;
  private constructor(result: RateLimitResult) {
    // A refusal of the failure mode (`closed`) is "unavailable"; one of `local`'s own bucket is a limit
    // reached, decided in this process (its policy named), as Redis's would be.
    const unavailable = result.source === 'fallback' && result.fallback?.mode !== 'local';
    super(unavailable ? ERRORS.UNAVAILABLE.message : ERRORS.RATE_LIMITED.message);
    this.name = 'RateLimitedError';
    this.statusCode = unavailable ? 503 : 429;
    this.result = result;
    this.retryAfterSeconds = retryAfterSeconds(result);
  }

  /** The error of a denied `result`, built without capturing a stack (a few µs per denied request). */
  static of(result: RateLimitResult): RateLimitedError {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    try {
      return new RateLimitedError(result);
    } finally {
      Error.stackTraceLimit = limit;
    }
  }
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Rate limit of this route (`@herald/rate-limiter/fastify`). */
    rateLimit?: RateLimitRouteConfig;
  }
}

/**
 * The `RateLimit-Policy` header of draft-ietf-httpapi-ratelimit-headers-11 for `limiter`:
 * `"name";q=<capacity>;w=<seconds to refill fully>` per policy.
 *
 * @example
 * ```ts
 * rateLimitPolicyHeader(limiter); // '"apiKey";q=100;w=2, "recipient";q=10;w=10'
 * ```
 */
export function rateLimitPolicyHeader(limiter: RateLimiter): string {
  return limiter.policies
    .map((p) => `"${p.name}";q=${Math.floor(p.capacity)};w=${Math.max(1, Math.ceil(p.windowSeconds))}`)
    .join(', ');
}

/**
 * Seconds a denied caller should wait, as `Retry-After` says it: `retryAfterMs` rounded up, at least 1.
 *
 * @example
 * ```ts
 * retryAfterSeconds({ retryAfterMs: 1200 }); // 2
 * ```
 */
export function retryAfterSeconds(result: Pick<RateLimitResult, 'retryAfterMs'>): number {
  return Math.max(1, Math.ceil(result.retryAfterMs / 1000));
}

/**
 * The `RateLimit` header of draft-ietf-httpapi-ratelimit-headers-11 for a decision:
 * `"name";r=<remaining>;t=<seconds>` per policy the decision reports. `t` is the seconds until the
 * policy's bucket is full again, except for the policy that denied a call: there it is the seconds
 * until the call can pass, the same number as `Retry-After` (a token bucket refills one token long
 * before it is full, and a client that waits `t` must not be told a shorter `Retry-After`, nor one
 * longer than it needs).
 *
 * @example
 * ```ts
 * rateLimitHeader(await limiter.consume('user-42')); // '"user";r=9;t=1'
 * ```
 */
export function rateLimitHeader(result: RateLimitResult): string {
  let header = '';
  let deniedShown = false;
  for (const s of result.policies) {
    if (header !== '') header += ', ';
    let t = Math.max(0, Math.ceil(s.resetAfterMs / 1000));
    if (!result.allowed && !deniedShown && s.policy === result.policy) {
      t = retryAfterSeconds(result);
      deniedShown = true;
    }
    header += `"${s.policy}";r=${Math.max(0, s.remaining)};t=${t}`;
  }
  return header;
}

/**
 * Fastify 5 plugin: limits every route that has `config.rateLimit`, sets the `RateLimit-Policy` and
 * `RateLimit` headers (draft-ietf-httpapi-ratelimit-headers-11) on its responses, and hands the app's
 * error handler what to answer, writing no error body itself: a denied call throws a
 * {@link RateLimitedError} (429, or 503 when the failure mode denied), a cost above a policy's capacity
 * the limiter's `CostExceedsCapacityError` (answer 400), a Redis outage under failure mode `throw` its
 * `RateLimiterUnavailableError` (answer 503).
 *
 * @example
 * ```ts
 * import { heraldRateLimit } from '@herald/rate-limiter/fastify';
 *
 * await app.register(heraldRateLimit, { limiter });
 * app.post('/notify', { config: { rateLimit: { key: (request) => request.ip } } }, async () => ({ ok: true }));
 * ```
 */
export const heraldRateLimit = fp<HeraldRateLimitOptions>(
  async (app: FastifyInstance, options: HeraldRateLimitOptions) => {
    const policyHeaders = new WeakMap<RateLimiter, string>();

    /** The route's limiter for `request`: at once, or a promise when the route picks it asynchronously. */
    const limiterOf = (
      request: FastifyRequest,
      route: RateLimitRouteConfig,
    ): RateLimiter | Promise<RateLimiter> =>
      typeof route.limiter === 'function' ? route.limiter(request) : (route.limiter ?? options.limiter);
    const policyHeaderOf = (limiter: RateLimiter): string => {
      let header = policyHeaders.get(limiter);
      if (header === undefined) {
        header = rateLimitPolicyHeader(limiter);
        policyHeaders.set(limiter, header);
      }
      return header;
    };
    /** Refuses a denied call: through `onDenied` when given (the hook must then not call `done`), else `done(error)`. */
    const deny = (reply: FastifyReply, result: RateLimitResult, done: (error?: Error) => void): void => {
      const error = RateLimitedError.of(result);
      if (options.onDenied === undefined) done(error);
      else options.onDenied(reply, error);
    };
    /** Route `preParsing` hook of routes with a `precheck` (callback style: no promise per request). */
    const precheck = (
      request: FastifyRequest,
      reply: FastifyReply,
      payload: unknown,
      done: (error: Error | null, payload?: unknown) => void,
    ): void => {
      const route = request.routeOptions.config.rateLimit as RateLimitRouteConfig;
      const ids = route.precheck?.(request);
      if (ids === undefined) {
        done(null, payload);
        return;
      }
      const early = (limiter: RateLimiter): void => {
        const result = limiter.deniedLocally(ids);
        if (result === undefined) {
          done(null, payload);
          return;
        }
        reply.header('RateLimit-Policy', policyHeaderOf(limiter));
        reply.header('RateLimit', rateLimitHeader(result));
        deny(reply, result, (error) => done(error ?? null, payload));
      };
      const limiter = limiterOf(request, route);
      if (limiter instanceof Promise) limiter.then(early, done);
      else early(limiter);
    };
    app.addHook('onRoute', (routeOptions) => {
      const route = routeOptions.config?.rateLimit;
      if (route?.precheck === undefined) return;
      // First of the route's `preParsing` hooks: a denied caller is refused before any other runs.
      const existing = routeOptions.preParsing;
      routeOptions.preParsing = [
        precheck as never,
        ...(existing === undefined ? [] : Array.isArray(existing) ? existing : [existing]),
      ];
    });

    const decide = (
      limiter: RateLimiter,
      key: RateLimitKey,
      cost: RateLimitCost,
      reply: FastifyReply,
      done: (error?: Error) => void,
    ): void => {
      reply.header('RateLimit-Policy', policyHeaderOf(limiter));
      limiter.consume(key, cost).then((result) => {
        reply.header('RateLimit', rateLimitHeader(result));
        if (result.allowed) done();
        else if (result.source === 'fallback' && passesUnavailable(reply.request, result)) done();
        else deny(reply, result, done);
      }, done);
    };
    const passesUnavailable = (request: FastifyRequest, result: RateLimitResult): boolean =>
      (request.routeOptions.config.rateLimit as RateLimitRouteConfig).passWhenUnavailable?.(
        request,
        result,
      ) === true;
    // Callback style, and with no promise but the limiter's own when the route's `limiter`, `key` and
    // `cost` are plain values (they are on Herald's routes): a denied flood pays one promise a request.
    // A throwing `key` or `cost`, a cost over capacity and an outage under failure mode `throw` reach the
    // error handler as they were thrown.
    const hook = (request: FastifyRequest, reply: FastifyReply, done: (error?: Error) => void): void => {
      const route = request.routeOptions.config.rateLimit;
      if (route === undefined) {
        done();
        return;
      }
      let limiter: RateLimiter | Promise<RateLimiter>;
      let key: RateLimitKey | Promise<RateLimitKey>;
      let cost: RateLimitCost | Promise<RateLimitCost>;
      try {
        limiter = limiterOf(request, route);
        key = route.key(request);
        cost = route.cost === undefined ? 1 : route.cost(request);
      } catch (error) {
        done(error as Error);
        return;
      }
      if (limiter instanceof Promise || key instanceof Promise || cost instanceof Promise) {
        Promise.all([limiter, key, cost]).then(([l, k, c]) => decide(l, k, c, reply, done), done);
      } else {
        decide(limiter, key, cost, reply, done);
      }
    };
    app.addHook(options.hook ?? 'preHandler', hook);
  },
  { fastify: '5.x', name: '@herald/rate-limiter' },
);
