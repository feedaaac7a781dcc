import { readFileSync } from 'node:fs';
import {
  isTenantId,
  WEBHOOK_EVENTS,
  type Webhook,
  type WebhookEventType,
  type WebhookJob,
  type WebhookWithSecret,
} from '@herald/protocol';
import type { Cluster, Redis } from 'ioredis';
import { generateSecret } from './signing.js';

/** Messages a parked endpoint holds at most (the oldest are dropped beyond it; see the README). */
export const MAX_HELD = 10_000;
/** How long a rotated secret's previous one keeps signing, ms: a day to deploy the new one. */
export const PREVIOUS_SECRET_MS = 24 * 3600 * 1000;

/** A tenant's webhook as stored, with its secrets (for signing). */
export interface WebhookRecord {
  tenantId: string;
  url: string;
  events: WebhookEventType[];
  /** The secrets that sign now: the current one, and the previous one within a day of a rotation. */
  secrets: string[];
  state: 'active' | 'parked';
  /** When it was created (kept by updates; a webhook deleted and set again is another, with another). */
  createdAt: string;
}

/** What `resume` answers: the webhook, active again, and how many held messages were queued again. */
export type ResumeResult =
  | { outcome: 'resumed'; webhook: Webhook; resent: number }
  | { outcome: 'not-parked' }
  | { outcome: 'missing' };

/** Outcome of {@link WebhookStore.hold}: held, not parked (deliver it), or no webhook (drop it). */
export type HoldOutcome = 'held' | 'deliver' | 'no-webhook';

const HOLD = 'heraldWebhookHold';
const UPDATE = 'heraldWebhookUpdate';

/**
 * Each tenant's webhook in Redis, under the gateway's key prefix (`HERALD_KEY_PREFIX`):
 * `<prefix>webhook:{<tenantId>}` (hash: url, events, secret, previous secret, state, failure count,
 * times), `<prefix>webhook:{<tenantId>}:held` (messages held while parked) and `<prefix>webhooks` (the set
 * of tenants that have one). A tenant has at most one webhook; every method takes the tenant id, and
 * routes pass the caller's own, so no tenant reaches another's.
 */
export class WebhookStore {
  readonly #redis: Redis | Cluster;
  readonly #prefix: string;

  constructor(redis: Redis | Cluster, keyPrefix: string) {
    this.#redis = redis;
    this.#prefix = keyPrefix;
    if (!(HOLD in redis)) {
      redis.defineCommand(HOLD, {
        numberOfKeys: 2,
        lua: readFileSync(new URL('./hold-2.lua', import.meta.url), 'utf8'),
      });
    }
    if (!(UPDATE in redis)) {
      redis.defineCommand(UPDATE, {
        numberOfKeys: 2,
        lua: readFileSync(new URL('./update-2.lua', import.meta.url), 'utf8'),
      });
    }
  }

  /** update-2.lua: `op` on `tenantId`'s webhook only while it exists (null when it does not). */
  #update(tenantId: string, op: string, ...args: string[]): Promise<unknown> {
    return (this.#redis as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[UPDATE]?.(
      this.#key(tenantId),
      this.#heldKey(tenantId),
      op,
      ...args,
    ) as Promise<unknown>;
  }

  #key(tenantId: string): string {
    if (!isTenantId(tenantId)) throw new Error(`"${tenantId}" is not a tenant id`);
    return `${this.#prefix}webhook:{${tenantId}}`;
  }

  #heldKey(tenantId: string): string {
    return `${this.#key(tenantId)}:held`;
  }

  #indexKey(): string {
    return `${this.#prefix}webhooks`;
  }

  /** The webhook of `tenantId` with its secrets (what the delivery worker signs with), or undefined. */
  async record(tenantId: string, now = Date.now()): Promise<WebhookRecord | undefined> {
    const fields = await this.#redis.hgetall(this.#key(tenantId));
    if (!fields.url || !fields.secret) return undefined;
    const previousUntil = Number(fields.previousSecretUntil ?? 0);
    return {
      tenantId,
      url: fields.url,
      events: eventsOf(fields.events),
      secrets: [
        fields.secret,
        ...(fields.previousSecret && previousUntil > now ? [fields.previousSecret] : []),
      ],
      state: fields.state === 'parked' ? 'parked' : 'active',
      createdAt: fields.createdAt ?? '',
    };
  }

  /** The webhook of `tenantId` as the API shows it (no secret), or undefined. */
  async get(tenantId: string): Promise<Webhook | undefined> {
    const [fields, held] = await Promise.all([
      this.#redis.hgetall(this.#key(tenantId)),
      this.#redis.llen(this.#heldKey(tenantId)),
    ]);
    return fields.url ? view(tenantId, fields, held) : undefined;
  }

  /**
   * Creates or updates the webhook of `tenantId`. A new one gets a secret, answered once (`secret`); an
   * update keeps the secret, the state and the counters (`resume` unparks).
   */
  async set(
    tenantId: string,
    options: { url: string; events?: readonly WebhookEventType[] | undefined },
  ): Promise<{ created: boolean; webhook: Webhook | WebhookWithSecret }> {
    const key = this.#key(tenantId);
    const now = new Date().toISOString();
    const events = (options.events ?? WEBHOOK_EVENTS).join(',');
    const secret = generateSecret();
    // The index is in another hash slot (Redis Cluster refuses a MULTI across slots): it goes first, so
    // that a webhook is never missing from it; `list` skips a tenant listed without one.
    await this.#redis.sadd(this.#indexKey(), tenantId);
    // HSETNX: of two concurrent creations, one secret wins, and each answer says which.
    // Read back in the same MULTI: the answer is what this write left, not another request's after it.
    const results = (await this.#redis
      .multi()
      .hsetnx(key, 'secret', secret)
      .hsetnx(key, 'createdAt', now)
      .hsetnx(key, 'state', 'active')
      .hsetnx(key, 'failures', '0')
      .hset(key, { url: options.url, events, updatedAt: now })
      .hgetall(key)
      .llen(this.#heldKey(tenantId))
      .exec()) as [null, unknown][];
    const created = results[0]?.[1] === 1;
    const webhook = view(tenantId, results[5]?.[1] as Record<string, string>, results[6]?.[1] as number);
    return { created, webhook: created ? { ...webhook, secret } : webhook };
  }

  /** Deletes the webhook of `tenantId` and its held messages; false when there was none. */
  async delete(tenantId: string): Promise<boolean> {
    const [[, deleted]] = (await this.#redis
      .multi()
      .del(this.#key(tenantId))
      .del(this.#heldKey(tenantId))
      .exec()) as [[null, number]];
    // After the webhook (another hash slot, see `set`): a tenant listed without one is skipped.
    await this.#redis.srem(this.#indexKey(), tenantId);
    return deleted === 1;
  }

  /**
   * A new secret for `tenantId`'s webhook, answered once; the previous one keeps signing beside it for
   * {@link PREVIOUS_SECRET_MS} (each message then carries two `v1,` signatures). Undefined without a webhook.
   */
  async rotate(tenantId: string): Promise<WebhookWithSecret | undefined> {
    const secret = generateSecret();
    const rotated = await this.#update(
      tenantId,
      'rotate',
      secret,
      String(Date.now() + PREVIOUS_SECRET_MS),
      new Date().toISOString(),
    );
    if (rotated === null) return undefined;
    const webhook = await this.get(tenantId);
    return webhook ? { ...webhook, secret } : undefined;
  }

  /**
   * Unparks `tenantId`'s webhook: counters reset, and the held messages handed to `requeue` (which queues
   * them again and answers how many). They leave the held list only once `requeue` has succeeded: a
   * resume that fails there (the queue's Redis) leaves the webhook active with its messages still held,
   * and a resume again (the caller's retry of the 503) queues them. Not parked and holding nothing:
   * `not-parked`.
   */
  async resume(tenantId: string, requeue: (held: WebhookJob[]) => Promise<number>): Promise<ResumeResult> {
    const key = this.#key(tenantId);
    const heldKey = this.#heldKey(tenantId);
    const [state, waiting] = await Promise.all([this.#redis.hget(key, 'state'), this.#redis.llen(heldKey)]);
    if (state === null) return { outcome: 'missing' };
    if (state !== 'parked' && waiting === 0) return { outcome: 'not-parked' };
    // One script: a message held (hold-2.lua) is either in this read or sees `active` and is sent; a
    // webhook deleted meanwhile is not brought back.
    const listed = (await this.#update(tenantId, 'resume', new Date().toISOString())) as string[] | null;
    if (listed === null) return { outcome: 'missing' };
    const held = listed.map((json) => JSON.parse(json) as WebhookJob);
    const resent = await requeue(held);
    // Those read above are the list's first entries: messages held since (parked again) stay after them.
    if (held.length > 0) await this.#redis.ltrim(heldKey, held.length, -1);
    const webhook = await this.get(tenantId);
    if (!webhook) return { outcome: 'missing' };
    return { outcome: 'resumed', webhook, resent };
  }

  /** Every tenant's webhook (no secrets), by tenant id. */
  async list(): Promise<Webhook[]> {
    const tenants = (await this.#redis.smembers(this.#indexKey())).filter(isTenantId).sort();
    const webhooks = await Promise.all(tenants.map((tenant) => this.get(tenant)));
    return webhooks.filter((webhook): webhook is Webhook => webhook !== undefined);
  }

  /** Holds `job` when its endpoint is parked (atomically with that check); see hold-2.lua. */
  async hold(job: WebhookJob): Promise<HoldOutcome> {
    const reply = (await (this.#redis as unknown as Record<string, (...a: unknown[]) => Promise<number>>)[
      HOLD
    ]?.(this.#key(job.tenantId), this.#heldKey(job.tenantId), JSON.stringify(job), MAX_HELD)) as number;
    return reply === 1 ? 'held' : reply === 0 ? 'deliver' : 'no-webhook';
  }

  /** A 2xx: the endpoint's failures in a row start again from 0. */
  async succeeded(tenantId: string): Promise<void> {
    // Only while the webhook exists (an HSET on a deleted one would bring back a half record).
    await this.#update(tenantId, 'succeeded', new Date().toISOString());
  }

  /**
   * A failed attempt: one more failure in a row; at `parkAfter` the endpoint is parked (no more attempts,
   * new messages held until `resume`). Answers whether it is parked now.
   */
  async failed(tenantId: string, error: string, parkAfter: number): Promise<boolean> {
    const failures = (await this.#update(
      tenantId,
      'failed',
      error.slice(0, 500),
      String(parkAfter),
      new Date().toISOString(),
    )) as number | null;
    return failures !== null && failures >= parkAfter;
  }
}

function eventsOf(csv: string | undefined): WebhookEventType[] {
  const listed = (csv ?? '').split(',');
  return WEBHOOK_EVENTS.filter((event) => listed.includes(event));
}

function view(tenantId: string, fields: Record<string, string>, held: number): Webhook {
  const previousUntil = Number(fields.previousSecretUntil ?? 0);
  return {
    tenantId,
    url: fields.url ?? '',
    events: eventsOf(fields.events),
    state: fields.state === 'parked' ? 'parked' : 'active',
    consecutiveFailures: Number(fields.failures ?? 0),
    held,
    createdAt: fields.createdAt ?? '',
    updatedAt: fields.updatedAt ?? '',
    ...(fields.parkedAt ? { parkedAt: fields.parkedAt } : {}),
    ...(fields.lastError ? { lastError: fields.lastError } : {}),
    ...(fields.lastSuccessAt ? { lastSuccessAt: fields.lastSuccessAt } : {}),
    ...(previousUntil > Date.now() ? { previousSecretUntil: new Date(previousUntil).toISOString() } : {}),
  };
}
