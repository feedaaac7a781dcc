import Type, { type Static } from 'typebox';
import { EscalateAfterMs, EscalationStatus } from './push.js';

/** Largest `userId` accepted, in characters. */
export const USER_ID_MAX_LENGTH = 256;

/**
 * Characters a `userId` may contain: letters, digits and `_ . : @ + = | / ~ -`; no `.` or `..` alone or
 * between slashes, which no URL can name (WHATWG URL resolves those path segments, `%2E` too; and a
 * proxy decodes `%2F` before it looks for them: the user's inbox routes could not be reached).
 */
export const USER_ID_PATTERN = '^(?!(?:.*/)?\\.\\.?(?:/|$))[A-Za-z0-9_.:@+=|/~-]+$';
/** Largest `payload`, in bytes of its JSON. */
export const PAYLOAD_MAX_BYTES = 16 * 1024;
/**
 * Deepest `payload`: objects and arrays nested at most this many levels (the payload object itself is
 * level 1). Deeper values overflow recursive encoders on the way to the browser (Socket.IO's parser
 * walks a packet recursively; a 16 KB payload can nest 3,000 levels).
 */
export const PAYLOAD_MAX_DEPTH = 32;
/** Deepest JSON request body, in levels of objects and arrays. */
export const BODY_MAX_DEPTH = 64;
/** Most notifications in one `POST /notify/batch`. */
export const BATCH_MAX_ITEMS = 100;
/**
 * Largest `priority` (the lowest): BullMQ's `PRIORITY_LIMIT`, 2 ** 21 - 1, the largest it takes. The
 * contract said 2 097 152 before 2026-12-05: BullMQ refused that one before sending it, and the gateway
 * answered a 503 "may or may not have been accepted" for a notification that was never stored.
 */
export const PRIORITY_MAX = 2 ** 21 - 1;

/** A recipient id: what the sending backend calls its user. */
export const UserId = Type.String({
  minLength: 1,
  maxLength: USER_ID_MAX_LENGTH,
  pattern: USER_ID_PATTERN,
  description:
    'The recipient, as the sending backend identifies its user: 1–256 of A–Z a–z 0–9 _ . : @ + = | / ~ -',
  examples: ['alice'],
});

/** Longest topic name, in characters. */
export const TOPIC_MAX_LENGTH = 64;
/**
 * Characters a topic name may contain: letters, digits and `_ . : / -` (the `topic` label's, so a topic
 * send's inbox entries carry their topic as that label). No braces: the name is a Redis Cluster hash tag.
 * No `.` or `..` alone or between slashes, as for user ids: the topic's routes (`/topics/:topic/…`) could
 * not be reached.
 */
export const TOPIC_PATTERN = '^(?!(?:.*/)?\\.\\.?(?:/|$))[A-Za-z0-9_.:/-]+$';
const Label = Type.String({ minLength: 1, maxLength: TOPIC_MAX_LENGTH, pattern: TOPIC_PATTERN });

/** The fields of one notification (the body of `POST /notify`, an item of a batch). */
const NotificationFields = {
  userId: UserId,
  payload: Type.Record(Type.String(), Type.Unknown(), {
    description: `Any JSON object up to ${PAYLOAD_MAX_BYTES} bytes and ${PAYLOAD_MAX_DEPTH} levels deep; delivered to the browser unchanged.`,
    examples: [{ title: 'Your order shipped', url: '/orders/1042' }],
  }),
  priority: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: PRIORITY_MAX,
      description: `1 is the highest, ${PRIORITY_MAX} the lowest: workers take a waiting notification of a higher priority first. Absent = ${PRIORITY_MAX}: in send order (FIFO) with the others sent without one, after every one sent with a smaller number.`,
      examples: [1],
    }),
  ),
  delayMs: Type.Optional(
    Type.Integer({
      minimum: 0,
      maximum: 30 * 24 * 3600 * 1000,
      description: 'Deliver no earlier than this many ms after acceptance (at most 30 days).',
      examples: [0],
    }),
  ),
  ttlMs: Type.Optional(
    Type.Integer({
      minimum: 1000,
      maximum: 30 * 24 * 3600 * 1000,
      description: 'Drop (status `expired`) if not delivered within this many ms of acceptance.',
      examples: [86_400_000],
    }),
  ),
  dedupeKey: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 128,
      description: 'Notifications to one recipient with the same key collapse into the first.',
      examples: ['order-1042-shipped'],
    }),
  ),
  topic: Type.Optional(Label),
  type: Type.Optional(Label),
  escalateAfterMs: Type.Optional(EscalateAfterMs),
};

/** Body of `POST /notify`. */
export const NotifyRequest = Type.Object(NotificationFields, {
  additionalProperties: false,
  // "Try it out" in /docs sends this: no delay, no TTL, an ordinary payload.
  examples: [{ userId: 'alice', payload: { title: 'Your order shipped', url: '/orders/1042' } }],
});
export type NotifyRequest = Static<typeof NotifyRequest>;

/**
 * Body of `POST /notify`: a notification to one user (`userId`; `topic` is then its label), to a topic's
 * subscribers (`topic` without `userId`), or to every user of the tenant (`broadcast: true`, without
 * `userId` or `topic`). The gateway checks that exactly one target is given.
 */
export const NotifySendRequest = Type.Object(
  {
    ...NotificationFields,
    userId: Type.Optional(UserId),
    topic: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: TOPIC_MAX_LENGTH,
        pattern: TOPIC_PATTERN,
        description:
          'With `userId`: a label the client may filter on. Without: the target, every subscriber of this topic of the tenant (`PUT /topics/:topic/subscribers`).',
        examples: ['orders'],
      }),
    ),
    broadcast: Type.Optional(
      Type.Literal(true, {
        description:
          'Send to every user of the tenant: each one ever notified or subscribed to a topic. Without `userId` and `topic`.',
      }),
    ),
  },
  {
    additionalProperties: false,
    examples: [{ userId: 'alice', payload: { title: 'Your order shipped', url: '/orders/1042' } }],
  },
);
export type NotifySendRequest = Static<typeof NotifySendRequest>;

/** `202` answer of `POST /notify`. */
export const NotifyAccepted = Type.Object({
  id: Type.String({ description: 'Notification id; the same id arrives in the `notification` event.' }),
  status: Type.Literal('queued'),
});
export type NotifyAccepted = Static<typeof NotifyAccepted>;

/** Body of `POST /notify/batch`. */
export const BatchRequest = Type.Object(
  {
    notifications: Type.Array(
      // Any JSON value here: the gateway validates each item on its own (an object, as the body of
      // POST /notify), so that anything else is rejected alone, in `results`, not with the whole batch.
      Type.Unknown({
        description:
          'A notification: an object exactly as the body of POST /notify. Each item is validated on its own: an invalid one (not an object included) is rejected alone, in `results`.',
      }),
      { minItems: 1, maxItems: BATCH_MAX_ITEMS },
    ),
  },
  {
    additionalProperties: false,
    examples: [
      {
        notifications: [
          { userId: 'alice', payload: { title: 'Your order shipped' } },
          { userId: 'bob', payload: { title: 'New comment' } },
        ],
      },
    ],
  },
);
export type BatchRequest = Static<typeof BatchRequest>;

/** One item's outcome in a `POST /notify/batch` answer. */
export const BatchItemResult = Type.Union([
  Type.Object({ index: Type.Integer(), status: Type.Literal('queued'), id: Type.String() }),
  Type.Object({
    index: Type.Integer(),
    status: Type.Literal('rejected'),
    error: Type.String(),
    code: Type.String(),
    details: Type.Optional(Type.Unknown()),
  }),
]);
export type BatchItemResult = Static<typeof BatchItemResult>;

/** `202` answer of `POST /notify/batch`: one result per item, in order. */
export const BatchAccepted = Type.Object({
  accepted: Type.Integer(),
  rejected: Type.Integer(),
  results: Type.Array(BatchItemResult),
});
export type BatchAccepted = Static<typeof BatchAccepted>;

/** Recipients of a topic send or broadcast so far (`GET /notifications/:id`). */
export const RecipientCounts = Type.Object(
  {
    total: Type.Integer({
      description:
        'Recipients of the fan-out: the audience’s size when it started, then, once it is `sent`, every recipient it went through.',
    }),
    reached: Type.Integer({ description: 'Recipients whose inbox has it (and who were pushed it live).' }),
    expired: Type.Integer({ description: 'Recipients reached after its `ttlMs`: recorded `expired`.' }),
    deduplicated: Type.Integer({
      description:
        'Recipients that had a notification with its `dedupeKey` already: collapsed into that one.',
    }),
    muted: Type.Integer({
      description: 'Recipients who muted its topic or type: skipped (nothing stored nor pushed).',
    }),
    failed: Type.Integer({
      description:
        'Recipients whose inbox Redis refused for its data (a key of the wrong type): not stored, each `failed` (ask with `?userId=`; a `notification.failed` webhook event each), while the others get it.',
    }),
  },
  { description: 'Only for a topic send or broadcast.' },
);
export type RecipientCounts = Static<typeof RecipientCounts>;

/** Answer of `GET /notifications/:id`. */
export const NotificationStatus = Type.Object({
  id: Type.String(),
  userId: Type.Optional(
    Type.String({ description: 'The recipient; absent for a topic send or broadcast (see `recipients`).' }),
  ),
  status: Type.Union(
    [
      Type.Literal('queued'),
      Type.Literal('delivered'),
      Type.Literal('failed'),
      Type.Literal('expired'),
      Type.Literal('sent'),
      Type.Literal('cancelled'),
      Type.Literal('muted'),
    ],
    {
      description:
        'A topic send or broadcast is `queued` while it fans out and `sent` once every recipient’s inbox has it; `delivered` is a recipient’s ack (ask with `?userId=`); `muted`: the recipient muted its topic or type, so it was never stored nor pushed.',
    },
  ),
  topic: Type.Optional(Type.String({ description: 'The topic of a topic send.' })),
  broadcast: Type.Optional(Type.Literal(true, { description: 'Present on a broadcast.' })),
  recipients: Type.Optional(RecipientCounts),
  attempts: Type.Integer({ description: 'Delivery attempts the worker made.' }),
  createdAt: Type.Optional(
    Type.String({
      format: 'date-time',
      description:
        'When the gateway accepted it; absent once its job is gone from the queue (the inbox keeps no copy).',
    }),
  ),
  deliveredAt: Type.Optional(Type.String({ format: 'date-time' })),
  sentAt: Type.Optional(
    Type.String({ format: 'date-time', description: 'A topic send or broadcast: when its fan-out ended.' }),
  ),
  failedAt: Type.Optional(Type.String({ format: 'date-time' })),
  failedReason: Type.Optional(Type.String()),
  cancelledAt: Type.Optional(
    Type.String({ format: 'date-time', description: 'With `cancelled`: when `DELETE` cancelled it.' }),
  ),
  duplicateOf: Type.Optional(
    Type.String({
      description: 'Collapsed by `dedupeKey` into this notification; the status is its status.',
    }),
  ),
  escalation: Type.Optional(EscalationStatus),
  muted: Type.Optional(
    Type.Union([Type.Object({ topic: Type.String() }), Type.Object({ type: Type.String() })], {
      description: 'With `muted`: the recipient muted this topic or type, so it was not stored nor pushed.',
    }),
  ),
});
export type NotificationStatus = Static<typeof NotificationStatus>;

/** Most topics one user token may let its user subscribe to themselves. */
export const TOKEN_TOPICS_MAX = 100;

/** Body of `POST /tokens`. */
export const TokenRequest = Type.Object(
  {
    userId: UserId,
    topics: Type.Optional(
      Type.Array(Label, {
        maxItems: TOKEN_TOPICS_MAX,
        description:
          'Topics of the tenant the user may subscribe to and unsubscribe from themselves, over the socket (`subscribe` / `unsubscribe`); none by default.',
      }),
    ),
  },
  { additionalProperties: false, examples: [{ userId: 'alice' }, { userId: 'alice', topics: ['news'] }] },
);
export type TokenRequest = Static<typeof TokenRequest>;

/** Answer of `POST /tokens`. */
export const TokenResponse = Type.Object({
  token: Type.String({ description: 'JWT (HS256) to pass as `auth.token` to the realtime server.' }),
  expiresAt: Type.String({ format: 'date-time' }),
});
export type TokenResponse = Static<typeof TokenResponse>;

/** Every HTTP error Herald answers has this shape. */
export const ErrorResponse = Type.Object({
  error: Type.String({ description: 'What went wrong and what to do about it.' }),
  code: Type.String({ description: 'Stable machine-readable code, `HERALD_ERR_*`.' }),
  details: Type.Optional(Type.Unknown()),
  retryAfterMs: Type.Optional(Type.Integer({ description: 'With 429: when the request can succeed.' })),
  policy: Type.Optional(
    Type.String({
      description:
        'With 429: the limit that refused (`sender`, `recipient`, `tokens` or `inbox`); with `HERALD_ERR_BATCH_EXCEEDS_BURST`: the limit the batch exceeds.',
    }),
  ),
  mismatches: Type.Optional(
    Type.Array(Type.String(), {
      description:
        'With `HERALD_ERR_DEPLOYMENT_MISMATCH` (`/readyz`): each setting this app and another of its deployment disagree on.',
    }),
  ),
  maybeAccepted: Type.Optional(
    Type.Boolean({
      description:
        'With 503: Redis did not confirm the enqueue in time, so the notification may be queued. A retry with the same `Idempotency-Key` is safe.',
    }),
  ),
  cost: Type.Optional(
    Type.Integer({
      description: 'With `HERALD_ERR_BATCH_EXCEEDS_BURST`: the tokens the batch asks of one bucket.',
    }),
  ),
  capacity: Type.Optional(
    Type.Integer({ description: "With `HERALD_ERR_BATCH_EXCEEDS_BURST`: that bucket's burst." }),
  ),
  state: Type.Optional(
    Type.String({
      description:
        'With `HERALD_ERR_NOT_FAILED` (admin retry): the state the notification is in (`waiting`, `active`, `completed`, …); with `HERALD_ERR_NOT_CANCELLABLE`: its status (`queued`, `delivered`, `failed`, `expired`).',
    }),
  ),
});
export type ErrorResponse = Static<typeof ErrorResponse>;
