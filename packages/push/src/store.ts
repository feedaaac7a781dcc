import { readFileSync } from 'node:fs';
import { escapeTag, readReplies, tenantPrefix } from '@herald/inbox';
import { PUSH_SUBSCRIPTIONS_PER_USER, type PushSubscriptionJSON } from '@herald/protocol';
import type { Cluster, Redis } from 'ioredis';

/** How long a user's subscriptions are kept after their last registration: 60 days (the SDK registers on every page load). */
export const PUSH_SUBSCRIPTION_TTL_MS = 60 * 24 * 3600 * 1000;

const SUBSCRIBE = 'heraldPushSubscribe';

/** The Redis keys of one user's push subscriptions, under the user's inbox hash tag. */
export interface PushSubscriptionKeys {
  /** Hash: endpoint → subscription JSON. */
  subscriptions: string;
  /** Sorted set: endpoint, scored by registration order (a per-user sequence): which is oldest. */
  order: string;
}

/**
 * The keys of `(tenantId, userId)`'s push subscriptions: `<inbox prefix>[t:<tenant>:]{<user>}:push:subs`
 * and `…:push:order`, in the user's hash slot beside their inbox, so that each tenant's user has their
 * own and no other can reach them (the tenant and user come from the verified token only).
 *
 * @example
 * ```ts
 * pushSubscriptionKeys('herald:inbox:', 'acme', 'alice').subscriptions; // 'herald:inbox:t:acme:{alice}:push:subs'
 * ```
 */
export function pushSubscriptionKeys(prefix: string, tenantId: string, userId: string): PushSubscriptionKeys {
  const base = `${tenantPrefix(prefix, tenantId)}{${escapeTag(userId)}}:push:`;
  return { subscriptions: `${base}subs`, order: `${base}order` };
}

/**
 * Users' Web Push subscriptions in Redis: registered from the user's own socket (realtime), read and
 * pruned by the worker when it escalates. At most {@link PUSH_SUBSCRIPTIONS_PER_USER} per user (a new
 * browser replaces the oldest), each kept {@link PUSH_SUBSCRIPTION_TTL_MS} after the user's last
 * registration. `prefix` is the inbox prefix (`HERALD_INBOX_PREFIX`).
 *
 * @example
 * ```ts
 * const store = new PushSubscriptions(redis, 'herald:inbox:');
 * await store.add('acme', 'alice', checked);
 * for (const subscription of await store.list('acme', 'alice')) send(subscription);
 * ```
 */
export class PushSubscriptions {
  readonly #redis: Redis | Cluster;
  readonly #prefix: string;
  readonly #max: number;

  constructor(redis: Redis | Cluster, prefix: string, options: { maxPerUser?: number } = {}) {
    this.#redis = redis;
    this.#prefix = prefix;
    this.#max = options.maxPerUser ?? PUSH_SUBSCRIPTIONS_PER_USER;
    if (!(SUBSCRIBE in redis)) {
      redis.defineCommand(SUBSCRIBE, {
        numberOfKeys: 2,
        lua: readFileSync(new URL('./subscribe-2.lua', import.meta.url), 'utf8'),
      });
    }
  }

  /** Stores `subscription` (checked by `checkSubscription`) for the user; answers how many they have and how many old ones it replaced. */
  async add(
    tenantId: string,
    userId: string,
    subscription: PushSubscriptionJSON,
  ): Promise<{ count: number; replaced: number }> {
    const keys = pushSubscriptionKeys(this.#prefix, tenantId, userId);
    const run = (this.#redis as unknown as Record<string, (...args: unknown[]) => Promise<[number, number]>>)[
      SUBSCRIBE
    ];
    const [count, replaced] = (await run?.call(
      this.#redis,
      keys.subscriptions,
      keys.order,
      subscription.endpoint,
      JSON.stringify(subscription),
      this.#max,
      PUSH_SUBSCRIPTION_TTL_MS,
    )) ?? [0, 0];
    return { count, replaced };
  }

  /** Removes the user's subscription with `endpoint` (unregistered, or gone at the push service); answers how many they have left. */
  async remove(tenantId: string, userId: string, endpoint: string): Promise<number> {
    const keys = pushSubscriptionKeys(this.#prefix, tenantId, userId);
    const results = await this.#redis
      .multi()
      .hdel(keys.subscriptions, endpoint)
      .zrem(keys.order, endpoint)
      .hlen(keys.subscriptions)
      .exec();
    return Number(results?.[2]?.[1] ?? 0);
  }

  /** The user's subscriptions, oldest first. An unreadable entry is left out. */
  async list(tenantId: string, userId: string): Promise<PushSubscriptionJSON[]> {
    const keys = pushSubscriptionKeys(this.#prefix, tenantId, userId);
    // A pipeline: a full Redis (maxmemory) refuses a MULTI's reads too; an endpoint without its entry is left out.
    const [order, all] = await readReplies(this.#redis, (redis) => [
      redis.zrange(keys.order, 0, -1),
      redis.hgetall(keys.subscriptions),
    ]);
    return order.flatMap((endpoint) => {
      const raw = all[endpoint];
      if (raw === undefined) return [];
      try {
        return [JSON.parse(raw) as PushSubscriptionJSON];
      } catch {
        return [];
      }
    });
  }
}
