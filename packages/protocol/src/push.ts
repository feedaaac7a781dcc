import Type, { type Static } from 'typebox';

/** Shortest `escalateAfterMs` of `POST /notify`: a second (a tab acks within milliseconds when one is open). */
export const ESCALATE_AFTER_MIN_MS = 1000;
/** Longest `escalateAfterMs`: a day (later than that a push is no longer an escalation, just late). */
export const ESCALATE_AFTER_MAX_MS = 24 * 3600 * 1000;
/** Most push subscriptions kept per user; registering one more replaces the oldest. */
export const PUSH_SUBSCRIPTIONS_PER_USER = 10;
/** Longest push endpoint URL accepted, in characters. */
export const PUSH_ENDPOINT_MAX_LENGTH = 2048;

/** The JSON of a browser's `PushSubscription` (`subscription.toJSON()`), what `push-subscribe` carries. */
export interface PushSubscriptionJSON {
  /** The push service's URL for this browser (https). */
  endpoint: string;
  /** `expirationTime` as the browser gives it (null or ms since epoch); kept, not enforced. */
  expirationTime?: number | null;
  keys: {
    /** The browser's P-256 ECDH public key, uncompressed (65 bytes), base64url. */
    p256dh: string;
    /** The 16-byte authentication secret, base64url. */
    auth: string;
  };
}

/**
 * What a Web Push message carries (JSON): the notification as the `notification` event has it, so a
 * service worker shows the same thing and a page that gets it from both paths dedupes by `id`. A
 * notification whose JSON would not fit a push message (about 3 KB after encryption overhead) carries
 * `truncated: true` and no `payload`: the page reads it from the inbox.
 */
export interface PushMessage {
  kind: 'herald.notification';
  id: string;
  offset: string;
  userId: string;
  createdAt: string;
  payload?: Record<string, unknown>;
  topic?: string;
  type?: string;
  truncated?: true;
}

/** Answer to `push-key`. */
export type PushKeyReply = { ok: true; publicKey: string } | { ok: false; error: string; code: string };

/** Answer to `push-subscribe` and `push-unsubscribe`: how many subscriptions the user has now. */
export type PushSubscribeReply =
  | { ok: true; subscriptions: number; replaced?: number }
  | { ok: false; error: string; code: string; retryAfterMs?: number };

/** Socket.IO events of Web Push a client sends; each acts on the token's own user only. */
export interface PushClientToServerEvents {
  /** The deployment's VAPID public key (base64url), for `pushManager.subscribe({ applicationServerKey })`. */
  'push-key': (reply: (answer: PushKeyReply) => void) => void;
  /**
   * Registers a push subscription of this browser for the user (kept up to
   * {@link PUSH_SUBSCRIPTIONS_PER_USER}, the oldest replaced); registering the same endpoint again
   * updates it.
   */
  'push-subscribe': (
    body: { subscription: PushSubscriptionJSON },
    reply?: (answer: PushSubscribeReply) => void,
  ) => void;
  /** Removes the user's subscription with this endpoint (none: nothing changes). */
  'push-unsubscribe': (body: { endpoint: string }, reply?: (answer: PushSubscribeReply) => void) => void;
}

/** Event names of Web Push, for code that does not use the typed maps. */
export const PushSocketEvent = {
  KEY: 'push-key',
  SUBSCRIBE: 'push-subscribe',
  UNSUBSCRIBE: 'push-unsubscribe',
} as const;

/** The `escalateAfterMs` field of `POST /notify` (and of a batch item). */
export const EscalateAfterMs = Type.Integer({
  minimum: ESCALATE_AFTER_MIN_MS,
  maximum: ESCALATE_AFTER_MAX_MS,
  description: `Web Push fallback: if no tab of the user acks it within this many ms of being stored, it is sent as a Web Push message to the user's registered browsers (${ESCALATE_AFTER_MIN_MS} to ${ESCALATE_AFTER_MAX_MS} ms; single-user sends only; 422 HERALD_ERR_PUSH_NOT_CONFIGURED without VAPID keys).`,
  examples: [30_000],
});

/** `escalation` of `GET /notifications/:id`: what became of a notification's Web Push fallback. */
export const EscalationStatus = Type.Object(
  {
    state: Type.Union(
      [Type.Literal('scheduled'), Type.Literal('acked'), Type.Literal('pushed'), Type.Literal('skipped')],
      {
        description:
          '`scheduled`: waiting for its deadline; `acked`: a tab acked it first, nothing was pushed; `pushed`: sent to the user’s push subscriptions (`sent`, `failed`); `skipped`: not sent (`reason`).',
      },
    ),
    dueAt: Type.Optional(
      Type.String({ format: 'date-time', description: 'When it escalates unless acked.' }),
    ),
    at: Type.Optional(
      Type.String({ format: 'date-time', description: 'When it was acked, pushed or skipped.' }),
    ),
    sent: Type.Optional(Type.Integer({ description: 'Subscriptions the push service accepted it for.' })),
    failed: Type.Optional(
      Type.Integer({ description: 'Subscriptions it could not reach (gone ones are removed).' }),
    ),
    reason: Type.Optional(
      Type.String({
        description:
          'With `skipped`: `no-subscriptions` (the user registered no browser) or `push-off` (the worker has no VAPID keys).',
      }),
    ),
  },
  { description: 'Only for a notification sent with `escalateAfterMs`.' },
);
export type EscalationStatus = Static<typeof EscalationStatus>;
