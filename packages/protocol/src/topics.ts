/**
 * Topics and broadcasts, inside a tenant: the HTTP bodies of the topic routes, the fan-out job the
 * gateway enqueues for `POST /notify` with a `topic` target (or `broadcast: true`), and its queue.
 */
import Type, { type Static } from 'typebox';
import type { NotificationJob } from './events.js';
import { TOPIC_MAX_LENGTH, TOPIC_PATTERN, UserId } from './schemas.js';

/** Most user ids in one `PUT` or `DELETE /topics/:topic/subscribers`. */
export const SUBSCRIBERS_BATCH_MAX = 1000;
/** Largest page of `GET /topics/:topic/subscribers`. */
export const SUBSCRIBERS_PAGE_MAX = 1000;

/** A topic name: 1–64 of A–Z a–z 0–9 _ . : / - */
export const TopicName = Type.String({
  minLength: 1,
  maxLength: TOPIC_MAX_LENGTH,
  pattern: TOPIC_PATTERN,
  description: 'A topic of the API key’s tenant: 1–64 of A–Z a–z 0–9 _ . : / -',
  examples: ['orders'],
});

/** Body of `PUT` and `DELETE /topics/:topic/subscribers` (the batch forms). */
export const SubscribersRequest = Type.Object(
  {
    userIds: Type.Array(UserId, {
      minItems: 1,
      maxItems: SUBSCRIBERS_BATCH_MAX,
      description: `1 to ${SUBSCRIBERS_BATCH_MAX} user ids of the tenant; one given twice counts once.`,
    }),
  },
  { additionalProperties: false, examples: [{ userIds: ['alice', 'bob'] }] },
);
export type SubscribersRequest = Static<typeof SubscribersRequest>;

/** Answer of a subscribe or unsubscribe. */
export const SubscribersChanged = Type.Object({
  topic: Type.String(),
  changed: Type.Integer({
    description: 'Users added (PUT) or removed (DELETE) by this call; those already so are not counted.',
  }),
  subscribers: Type.Integer({ description: 'Subscribers of the topic after the call.' }),
});
export type SubscribersChanged = Static<typeof SubscribersChanged>;

/** Answer of `GET /topics/:topic/subscribers`: a page in user id order (byte-wise). */
export const SubscribersPage = Type.Object({
  topic: Type.String(),
  userIds: Type.Array(Type.String()),
  nextAfter: Type.Union([Type.String(), Type.Null()], {
    description: 'Pass as `after` for the next page; null when this page reached the end.',
  }),
  subscribers: Type.Integer({ description: 'Subscribers of the topic now.' }),
});
export type SubscribersPage = Static<typeof SubscribersPage>;

/** Who a fan-out goes to: a topic's subscribers, or every user of the tenant. */
export type FanoutAudience = { topic: string } | { broadcast: true };

/**
 * The sender's bucket a fan-out pays from, one token per recipient: the gateway's `sender` policy of
 * the API key (its key prefix, burst and rate), so that the worker charges the very bucket the gateway
 * reads.
 */
export interface FanoutCharge {
  /** Key prefix of the sender policy (`<HERALD_RATE_LIMIT_PREFIX>sender:`). */
  keyPrefix: string;
  /** The API key's id. */
  senderId: string;
  capacity: number;
  ratePerSecond: number;
  /** Tokens the gateway took at acceptance (1): the worker takes the rest. */
  prepaid: number;
  /** On Redis Cluster: the hash tag of the sender's bucket (its tenant), as the gateway keys it. */
  hashTag?: string;
}

/** Data of a BullMQ `fanout` job: one topic send or broadcast, expanded by the worker in chunks. */
export interface FanoutJob extends Omit<NotificationJob, 'userId'> {
  audience: FanoutAudience;
  charge: FanoutCharge;
}

/** BullMQ job name of a topic send or broadcast. */
export const FANOUT_JOB_NAME = 'fanout';

/**
 * The queue of fan-out jobs beside notification queue `queueName`: its own queue, so that a large fan-out
 * waits behind nothing and nothing waits behind it (the workers take it with their own, small, concurrency).
 *
 * @example
 * ```ts
 * fanoutQueueName('notifications'); // 'notifications-fanout'
 * ```
 */
export function fanoutQueueName(queueName: string): string {
  return `${queueName}-fanout`;
}
