import type { Cluster, Redis } from 'ioredis';
import { decodeLiveMessage, type LiveChannelSettings, type LiveMessage, liveChannel } from './message.js';

/**
 * How long after ioredis's sharded subscribers were set up again (a Cluster failover or slot migration)
 * the inbox is read a second time, ms: their re-subscriptions are sent, not yet confirmed, when it says so.
 */
const RESUBSCRIBED_SETTLE_MS = 1000;

/** Which node is the master of each slot, as `cluster`'s slot table says now (ranges of one master). */
function slotMasters(cluster: Cluster): string {
  let masters = '';
  let previous: string | undefined;
  for (let slot = 0; slot < 16384; slot++) {
    const master = cluster.slots[slot]?.[0];
    if (master === previous) continue;
    masters += `${slot}:${master};`;
    previous = master;
  }
  return masters;
}

/** Receives the live messages of one user. */
export type LiveListener = (message: LiveMessage) => void;

/** One listener's hold on a user's channel. */
export interface LiveSubscription {
  /**
   * Settles once Redis confirmed the subscription: anything published on the channel from then on reaches
   * the listener. Read the inbox only after this (replay then live, no gap at the seam).
   */
  readonly ready: Promise<void>;
  /** Stops the listener; the channel is unsubscribed when its last listener stops. */
  close(): void;
}

/** Settings of a {@link LiveSubscriber}. */
export interface LiveSubscriberOptions extends LiveChannelSettings {
  /**
   * Called after the subscriber connection came back from an outage, once its subscriptions took effect
   * again, and (Redis Cluster, sharded) after the subscriptions moved to another node (a failover, a slot
   * migration), twice: messages published meanwhile are lost, so read the inbox for every listener (fill
   * the gaps).
   */
  onReconnect?: () => void;
  /** A subscribe, unsubscribe or message that failed (the subscriber goes on). */
  onError?: (error: unknown) => void;
  /** Delay before retrying a subscribe that failed (Redis down), ms. Default 1,000. */
  retryMs?: number;
}

interface Channel {
  listeners: Set<LiveListener>;
  ready: Promise<void>;
}

/**
 * Subscribes a dedicated Redis connection to the live channels of the users that have listeners in this
 * process (one SUBSCRIBE, or SSUBSCRIBE in `sharded` mode, per user, shared by all the user's listeners)
 * and hands each message to those listeners. ioredis subscribes again by itself after a reconnect;
 * `onReconnect` says when that took effect.
 *
 * @example
 * ```ts
 * const live = new LiveSubscriber(redis.duplicate(), { key: 'herald', mode: 'classic' });
 * const subscription = live.subscribe('acme', 'alice', (message) => console.log(message.kind));
 * await subscription.ready;   // now read the inbox: nothing published from here on is missed
 * subscription.close();
 * ```
 */
export class LiveSubscriber {
  readonly #redis: Redis | Cluster;
  readonly #settings: LiveChannelSettings;
  readonly #channels = new Map<string, Channel>();
  readonly #onError: (error: unknown) => void;
  readonly #retryMs: number;

  constructor(redis: Redis | Cluster, options: LiveSubscriberOptions) {
    this.#redis = redis;
    this.#settings = { key: options.key, mode: options.mode };
    this.#onError = options.onError ?? (() => {});
    this.#retryMs = options.retryMs ?? 1000;
    const event = options.mode === 'sharded' ? 'smessage' : 'message';
    redis.on(event, (channel: string, text: string) => this.#dispatch(channel, text));
    const onReconnect = options.onReconnect;
    if (onReconnect) {
      // ioredis sends the re-subscriptions before `ready`; the PING goes after them on the same
      // connection, so once it answers, anything published later arrives live.
      let wasReady = redis.status === 'ready';
      redis.on('ready', () => {
        if (!wasReady) {
          wasReady = true;
          return;
        }
        redis.ping().then(() => onReconnect(), this.#onError);
      });
      // Sharded subscribers of a Redis Cluster (ioredis `shardedSubscribers`): after a failover or a
      // slot migration the old master drops the channels of its slots, and ioredis subscribes them again
      // on the new one once it reads the slot table (its `slotsRefreshInterval`), then says
      // `subscribersReady`; what was published in between reached no one. Its re-subscriptions are sent,
      // not confirmed, by then: the inbox is read again a moment later for a message published while
      // they were on their way. Only when a slot's master changed: while a node is down ioredis sets its
      // subscribers up again every second or two, and says so each time.
      let masters = 'slots' in redis ? slotMasters(redis) : '';
      redis.on('subscribersReady', () => {
        const now = 'slots' in redis ? slotMasters(redis) : '';
        if (now === masters) return;
        masters = now;
        if (this.#channels.size === 0) return;
        onReconnect();
        setTimeout(() => {
          if (this.#channels.size > 0) onReconnect();
        }, RESUBSCRIBED_SETTLE_MS).unref();
      });
    }
  }

  /** How many user channels this subscriber holds. */
  get size(): number {
    return this.#channels.size;
  }

  /** Starts `listener` on the live channel of `userId` of `tenantId`. */
  subscribe(tenantId: string, userId: string, listener: LiveListener): LiveSubscription {
    const name = liveChannel(this.#settings.key, tenantId, userId);
    let channel = this.#channels.get(name);
    if (!channel) {
      const created: Channel = { listeners: new Set(), ready: Promise.resolve() };
      this.#channels.set(name, created);
      created.ready = this.#subscribe(name, created);
      channel = created;
    }
    const held = channel;
    held.listeners.add(listener);
    let closed = false;
    return {
      ready: held.ready,
      close: () => {
        if (closed) return;
        closed = true;
        held.listeners.delete(listener);
        if (held.listeners.size > 0 || this.#channels.get(name) !== held) return;
        this.#channels.delete(name);
        // A later subscribe of the same channel goes after this on the same connection: Redis keeps order.
        const done =
          this.#settings.mode === 'sharded' ? this.#redis.sunsubscribe(name) : this.#redis.unsubscribe(name);
        done.catch(this.#onError);
      },
    };
  }

  /** Resolves once Redis confirmed the subscription, retrying while it fails (or until the channel is released). */
  #subscribe(name: string, channel: Channel): Promise<void> {
    return new Promise((resolve) => {
      const attempt = () => {
        if (this.#channels.get(name) !== channel) {
          resolve();
          return;
        }
        const done =
          this.#settings.mode === 'sharded' ? this.#redis.ssubscribe(name) : this.#redis.subscribe(name);
        done.then(
          () => resolve(),
          (error: unknown) => {
            this.#onError(error);
            setTimeout(attempt, this.#retryMs).unref();
          },
        );
      };
      attempt();
    });
  }

  #dispatch(name: string, text: string): void {
    const channel = this.#channels.get(name);
    if (!channel) return; // unsubscribed a moment ago
    let message: LiveMessage;
    try {
      message = decodeLiveMessage(text);
    } catch (error) {
      this.#onError(error);
      return;
    }
    for (const listener of channel.listeners) listener(message);
  }
}
