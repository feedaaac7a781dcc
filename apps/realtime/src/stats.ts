import { everySecond, INSTANCE_STALE_MS, latencyBucket, STATS_TTL_SECONDS, statsKeys } from '@herald/config';
import type { InboxOffset, NotificationEvent, SyncedEvent } from '@herald/protocol';
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { RealtimeConfig } from './config.js';

/**
 * Live notifications remembered (id → creation time) until a client acks them, per instance: the
 * oldest is forgotten beyond this (a client that never acks), so memory stays under about 1.5 MB.
 */
export const PENDING_ACKS_MAX = 10_000;

/** How a connection began, for the dashboard's resume outcomes. */
export type ResumeOutcome = 'fresh' | 'recovered' | 'resync';

/** What one socket's delivery reports (see {@link RealtimeStats.connection}). */
export interface ConnectionStats {
  notification(event: NotificationEvent): void;
  synced(event: SyncedEvent): void;
  resync(): void;
}

/**
 * This instance's figures for the operator dashboard, counted in memory and written to Redis once
 * per second (one MULTI, 50 ms after each second; nothing per notification or ack):
 * - a heartbeat with its open connections (expires after 3 s: a dead instance drops off);
 * - resume outcomes: a connection without `lastOffset` is `fresh`; with one, `recovered` (and its
 *   replayed count) or `resync` (the offset was gone);
 * - end-to-end delivery latency: for each notification sent live, the first ack on this instance −
 *   its `createdAt`, into the log-linear histogram of `@herald/config` (`lat:<bucket>` fields).
 *   Replayed notifications are left out: their wait is the client's absence, not Herald's latency.
 */
export class RealtimeStats {
  readonly #redis: Redis | Cluster;
  readonly #keys: ReturnType<typeof statsKeys>;
  readonly #instanceId: string;
  readonly #connections: () => number;
  readonly #log: Logger;
  /** Redis's clock: the seconds written (the same keys as every other instance's) and latencies. */
  readonly #now: () => number;
  readonly #pending = new Map<string, number>();
  #counts = new Map<string, number>();
  #ticker: { stop(): void } | undefined;

  /** `connections` answers this instance's open connections (Engine.IO clients). */
  constructor(
    redis: Redis | Cluster,
    config: Pick<RealtimeConfig, 'keyPrefix' | 'deployment' | 'instanceId'>,
    connections: () => number,
    log: Logger,
    now: () => number,
  ) {
    this.#now = now;
    this.#redis = redis;
    this.#keys = statsKeys(config.keyPrefix, config.deployment.name);
    this.#instanceId = config.instanceId;
    this.#connections = connections;
    this.#log = log;
  }

  /** Writes now and then once per second. */
  start(): void {
    this.#ticker ??= everySecond((second) => this.#flush(second), 50, this.#now);
    this.#flush(Math.floor(this.#now() / 1000));
  }

  /** Writes what is counted and leaves the dashboard (on shutdown). */
  async stop(): Promise<void> {
    this.#ticker?.stop();
    this.#ticker = undefined;
    const multi = this.#redis.multi();
    this.#queueCounts(multi, Math.floor(this.#now() / 1000));
    multi.del(this.#keys.instance(this.#instanceId)).zrem(this.#keys.instances, this.#instanceId);
    await multi.exec().catch(() => {});
  }

  /** The reporter of one socket that connected with `lastOffset` (absent: live from now). */
  connection(lastOffset: InboxOffset | undefined): ConnectionStats {
    let live = false;
    let resynced = false;
    return {
      notification: (event) => {
        if (live) this.#sentLive(event);
      },
      synced: (event) => {
        live = true;
        if (lastOffset === undefined) this.#add('fresh');
        else if (resynced) this.#add('resync');
        else {
          this.#add('recovered');
          this.#add('replayed', event.replayed);
        }
      },
      resync: () => {
        resynced = true;
      },
    };
  }

  /**
   * First acks of `ids`, recorded by the inbox at `atMs` (Redis time, as `createdAt` is): a latency
   * sample for each notification sent live here.
   */
  acked(ids: readonly string[], atMs: number): void {
    for (const id of ids) {
      const createdAt = this.#pending.get(id);
      if (createdAt === undefined) continue;
      this.#pending.delete(id);
      this.#add(`lat:${latencyBucket(atMs - createdAt)}`);
    }
  }

  #sentLive(event: NotificationEvent): void {
    const createdAt = Date.parse(event.createdAt);
    if (Number.isNaN(createdAt) || this.#pending.has(event.id)) return;
    if (this.#pending.size >= PENDING_ACKS_MAX) {
      // Maps iterate in insertion order: the first key is the oldest.
      const oldest = this.#pending.keys().next().value;
      if (oldest !== undefined) this.#pending.delete(oldest);
    }
    this.#pending.set(event.id, createdAt);
  }

  #add(field: string, by = 1): void {
    if (by > 0) this.#counts.set(field, (this.#counts.get(field) ?? 0) + by);
  }

  #queueCounts(multi: ReturnType<Redis['multi']>, second: number): void {
    if (this.#counts.size === 0) return;
    const key = this.#keys.delivery(second);
    for (const [field, count] of this.#counts) multi.hincrby(key, field, count);
    multi.expire(key, STATS_TTL_SECONDS);
    this.#counts = new Map();
  }

  #flush(second: number): void {
    const at = this.#now();
    const multi = this.#redis.multi();
    this.#queueCounts(multi, second);
    multi
      .set(
        this.#keys.instance(this.#instanceId),
        JSON.stringify({ connections: this.#connections(), at }),
        'PX',
        INSTANCE_STALE_MS,
      )
      .zadd(this.#keys.instances, at, this.#instanceId)
      // Instances gone for a minute leave the index (their heartbeat key expired long ago).
      .zremrangebyscore(this.#keys.instances, '-inf', at - 60_000);
    multi.exec().catch((error: unknown) => this.#log.debug({ err: error }, 'stats flush failed'));
  }
}
