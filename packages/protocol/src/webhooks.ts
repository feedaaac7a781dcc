import Type, { type Static } from 'typebox';

/**
 * Delivery webhooks: what Herald tells a tenant's backend about its notifications, as Standard Webhooks
 * (https://www.standardwebhooks.com, what Svix sends) define the request: a JSON body
 * `{ type, timestamp, data }` and the headers `webhook-id`, `webhook-timestamp`, `webhook-signature`.
 */

/** Every event a webhook can receive, in the order a notification can reach them. */
export const WEBHOOK_EVENTS = [
  'notification.delivered',
  'notification.read',
  'notification.failed',
  'notification.expired',
] as const;

/** One of {@link WEBHOOK_EVENTS}. */
export type WebhookEventType = (typeof WEBHOOK_EVENTS)[number];

/** BullMQ job name of one webhook message. */
export const WEBHOOK_JOB_NAME = 'webhook';

/**
 * The BullMQ queue of webhook messages, beside the notification queue (same `HERALD_QUEUE_PREFIX`).
 *
 * @example
 * ```ts
 * webhookQueueName('notifications'); // 'notifications-webhooks'
 * ```
 */
export function webhookQueueName(queueName: string): string {
  return `${queueName}-webhooks`;
}

/** What an event says about its notification (`data` of the body). */
export interface WebhookEventData {
  notificationId: string;
  userId: string;
  /** ISO 8601: when the fact happened (first ack, read, last failed attempt, found expired). */
  at: string;
  /** `notification.failed`: attempts made and the last error. */
  attempts?: number;
  reason?: string;
}

/** The JSON body Herald POSTs. */
export interface WebhookPayload {
  type: WebhookEventType;
  /** ISO 8601: when Herald produced the event. */
  timestamp: string;
  data: WebhookEventData;
}

/** Data of a webhook job: one message for one tenant's endpoint. */
export interface WebhookJob {
  /** Message id (`webhook-id`): the same for every attempt and every duplicate of one event. */
  id: string;
  tenantId: string;
  payload: WebhookPayload;
  /** Attempts made so far (the worker counts them; absent = none). */
  attempts?: number;
  /**
   * The creation time of the webhook it was produced for: a message of a webhook deleted since (another
   * created in its place has another) is dropped, never sent to the new URL. Absent: produced before this
   * field existed, delivered to whatever webhook there is.
   */
  webhook?: string;
}

const WebhookEvent = Type.Union(
  [
    Type.Literal('notification.delivered'),
    Type.Literal('notification.read'),
    Type.Literal('notification.failed'),
    Type.Literal('notification.expired'),
  ],
  { description: 'A delivery event' },
);

/**
 * The JSON body of every webhook request, as a schema (published in the gateway's OpenAPI document as
 * `components.schemas.WebhookEvent`; {@link WebhookPayload} is its type).
 */
export const WebhookEventBody = Type.Object(
  {
    type: WebhookEvent,
    timestamp: Type.String({ format: 'date-time', description: 'When Herald produced the event.' }),
    data: Type.Object({
      notificationId: Type.String(),
      userId: Type.String(),
      at: Type.String({
        format: 'date-time',
        description: 'When it happened: first ack, read, last failed attempt, found expired.',
      }),
      attempts: Type.Optional(Type.Integer({ description: '`notification.failed`: attempts made.' })),
      reason: Type.Optional(Type.String({ description: '`notification.failed`: the last error.' })),
    }),
  },
  {
    $id: 'WebhookEvent',
    title: 'WebhookEvent',
    description:
      'What Herald POSTs to a tenant’s webhook URL, with the headers `webhook-id` (stable per event), `webhook-timestamp` (seconds) and `webhook-signature` (`v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, Standard Webhooks). Verify it and refuse timestamps more than 5 minutes off.',
  },
);

/** Body of `PUT /webhook` and `PUT /admin/tenants/:tenantId/webhook`. */
export const WebhookRequest = Type.Object(
  {
    url: Type.String({
      minLength: 1,
      maxLength: 2048,
      description:
        'Where Herald POSTs events: an absolute https:// (or http://) URL. Addresses in loopback, private, link-local and other non-public ranges are refused unless HERALD_WEBHOOK_ALLOW_PRIVATE=true or HERALD_DEV_MODE=true.',
      examples: ['https://api.example.com/herald/webhook'],
    }),
    events: Type.Optional(
      Type.Array(WebhookEvent, {
        minItems: 1,
        maxItems: WEBHOOK_EVENTS.length,
        uniqueItems: true,
        description: 'The events to receive; default: all of them.',
      }),
    ),
  },
  { additionalProperties: false },
);
export type WebhookRequest = Static<typeof WebhookRequest>;

/** A tenant's webhook as the API shows it (never its secret, except once: {@link WebhookWithSecret}). */
export const Webhook = Type.Object({
  tenantId: Type.String(),
  url: Type.String(),
  events: Type.Array(WebhookEvent),
  state: Type.Union([Type.Literal('active'), Type.Literal('parked')], {
    description:
      '`parked` after HERALD_WEBHOOK_PARK_AFTER failed attempts in a row: no more attempts, new events are held until `resume`.',
  }),
  consecutiveFailures: Type.Integer({ minimum: 0 }),
  /** Events held while parked, sent again on `resume`. */
  held: Type.Integer({ minimum: 0 }),
  createdAt: Type.String({ format: 'date-time' }),
  updatedAt: Type.String({ format: 'date-time' }),
  parkedAt: Type.Optional(Type.String({ format: 'date-time' })),
  lastError: Type.Optional(Type.String()),
  lastSuccessAt: Type.Optional(Type.String({ format: 'date-time' })),
  /** Until then, the previous secret signs too (a second `v1,` signature): time to deploy the new one. */
  previousSecretUntil: Type.Optional(Type.String({ format: 'date-time' })),
});
export type Webhook = Static<typeof Webhook>;

/** A webhook with its signing secret: the answer of creation and of `rotate-secret`, shown once. */
export const WebhookWithSecret = Type.Object({
  ...Webhook.properties,
  secret: Type.String({
    description:
      'The signing secret (`whsec_` + base64 of 32 random bytes), shown once: store it now. Verify with any Standard Webhooks library.',
  }),
});
export type WebhookWithSecret = Static<typeof WebhookWithSecret>;
