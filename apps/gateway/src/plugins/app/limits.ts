import { type NotifyRequest, userKey } from '@herald/protocol';
import { heraldRateLimit, type RateLimitRouteConfig } from '@herald/rate-limiter/fastify';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Static } from 'typebox';
import { Limits, RECIPIENT_POLICY, SENDER_POLICY } from '../../limits.js';
import { sendRateLimited } from './errors.js';

type NotifyItem = Static<typeof NotifyRequest>;

declare module 'fastify' {
  interface FastifyRequest {
    /** The request's limiter call, computed once for its key and its cost (`notifyRateLimit`). */
    limitCall: LimitCall | undefined;
  }
  interface FastifyInstance {
    /** The gateway's limiters (per API key's limits), for routes' `config.rateLimit`. */
    limits: Limits;
    /**
     * `config.rateLimit` of a route that sends the notifications `itemsOf(request)`: the sender (API
     * key) pays one token per notification, each recipient one per notification it gets, all in one
     * atomic decision. No items (a topic send or broadcast): the sender pays one token now, the worker
     * the rest as it fans out (one per recipient).
     */
    notifyRateLimit(itemsOf: (request: FastifyRequest) => readonly NotifyItem[]): RateLimitRouteConfig;
  }
}

/**
 * True for the body of a topic send or broadcast (`POST /notify` with `topic` or `broadcast` and no
 * `userId`): one job that the worker fans out.
 */
export function isFanoutSend(body: unknown): body is Omit<NotifyItem, 'userId'> & { broadcast?: true } {
  return (
    typeof body === 'object' &&
    body !== null &&
    !('userId' in body) &&
    ('topic' in body || 'broadcast' in body)
  );
}

/**
 * The ids and costs of one decision: the sender pays for every item, each recipient for its own;
 * `notifications` is how many the request sends (0 for a fan-out send).
 */
export type LimitCall = {
  key: Record<string, string | string[]>;
  cost: Record<string, number | number[]>;
  notifications: number;
};

function limitCallOf(request: FastifyRequest, items: readonly NotifyItem[]): LimitCall {
  // A single notification to one recipient: no map, no arrays.
  // The recipient's bucket is its tenant's user's (`<tenant>/<user>`): another tenant cannot drain it.
  const { id: sender, tenantId } = request.identity;
  if (items.length === 0)
    return { key: { [SENDER_POLICY]: sender }, cost: { [SENDER_POLICY]: 1 }, notifications: 0 };
  const only = items.length === 1 ? items[0] : undefined;
  if (only) {
    return {
      key: { [SENDER_POLICY]: sender, [RECIPIENT_POLICY]: userKey(tenantId, only.userId) },
      cost: { [SENDER_POLICY]: 1, [RECIPIENT_POLICY]: 1 },
      notifications: 1,
    };
  }
  const perRecipient = new Map<string, number>();
  for (const item of items) {
    const recipient = userKey(tenantId, item.userId);
    perRecipient.set(recipient, (perRecipient.get(recipient) ?? 0) + 1);
  }
  return {
    key: { [SENDER_POLICY]: sender, [RECIPIENT_POLICY]: [...perRecipient.keys()] },
    cost: { [SENDER_POLICY]: items.length, [RECIPIENT_POLICY]: [...perRecipient.values()] },
    notifications: items.length,
  };
}

/**
 * The limits: `app.limits`, `app.notifyRateLimit`, and `@herald/rate-limiter`'s plugin, which runs
 * each route's `config.rateLimit` after authentication and validation (bad input costs no tokens),
 * sets the draft-11 headers and throws its refusals to the error handler (plugins/app/errors.ts).
 */
export default fp(
  async (app: FastifyInstance) => {
    // Every decision is also counted for the admin API (in memory; written once per second).
    const limits = new Limits(
      app.redis,
      app.config,
      app.log,
      (result) => app.traffic.record(result),
      app.notifications.gathering?.schedule,
    );
    app.metrics.decisionTotals = () => limits.totals();
    app.decorate('limits', limits);

    const limiterOf = (request: FastifyRequest) => limits.for(request.identity);
    const senderOnlyOf = (request: FastifyRequest) => limits.senderOnly(request.identity);
    // A sender (API key) that is being denied is refused before its body is read: a flood from a key
    // over its limit costs the gateway the least it can, and Redis nothing.
    // A request with an Idempotency-Key is not refused early: a retry of an accepted request must reach
    // its stored answer (a replay costs no tokens), and a new key still meets the full decision.
    const senderOf = (request: FastifyRequest) =>
      request.headers['idempotency-key'] === undefined ? { [SENDER_POLICY]: request.identity.id } : undefined;
    app.decorate('notifyRateLimit', (itemsOf: (request: FastifyRequest) => readonly NotifyItem[]) => {
      // The plugin asks for the key and then the cost of one request: computed once (a request property,
      // cheaper than a WeakMap entry per request; a request meets one route's limiter).
      const callOf = (request: FastifyRequest): LimitCall => {
        request.limitCall ??= limitCallOf(request, itemsOf(request));
        return request.limitCall;
      };
      return {
        // Before the body is read (`precheck`) a request is any send: the sender's bucket is the same.
        limiter: (request) => (isFanoutSend(request.body) ? senderOnlyOf(request) : limiterOf(request)),
        precheck: senderOf,
        // Asked right before its decision is queued: from here a notification waits for its gathering
        // (its decision, then its envelope), unless it fans out (no envelope, no gathering).
        key: (request) => {
          const call = callOf(request);
          if (!isFanoutSend(request.body)) app.notifications.waiting(request, call.notifications);
          return call.key;
        },
        cost: (request) => callOf(request).cost,
      } satisfies RateLimitRouteConfig;
    });

    app.decorateRequest('limitCall', undefined);
    await app.register(heraldRateLimit, { limiter: limits.defaults(), onDenied: sendRateLimited });
  },
  {
    name: 'limits',
    dependencies: ['config', 'redis', 'metrics', 'api-keys', 'admin', 'notifications'],
    fastify: '5.x',
  },
);
