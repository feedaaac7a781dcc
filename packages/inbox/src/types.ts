import type { EscalationStatus, InboxOffset, NotificationEvent, UnreadEvent } from '@herald/protocol';

/** Default key prefix of every inbox key. */
export const DEFAULT_INBOX_PREFIX = 'herald:inbox:';
/** Default number of notifications kept per user. */
export const DEFAULT_INBOX_MAX_LENGTH = 1000;
/** Default age after which a notification leaves the inbox: 30 days. */
export const DEFAULT_INBOX_MAX_AGE_MS = 30 * 24 * 3600 * 1000;
/** Default time a notification's records (status, idempotency marker) outlive `maxAgeMs`: 1 day. */
export const DEFAULT_INBOX_RECORD_GRACE_MS = 24 * 3600 * 1000;
/** Largest page `read`/`list` answer, and most ids per `ack`/`markRead` call. */
export const MAX_PAGE = 1000;

/**
 * Most bytes of notifications (their stored JSON) one page holds, about: a page of 1,000 notifications
 * of 16 KB each was 16 MB read by one Redis command and answered at once, which stalled Redis for every
 * tenant (a tenant reading its own inbox within its limits). A page stops once it holds this much (at
 * least one notification), and says there is more.
 */
export const PAGE_BYTES = 1_048_576;

/** Settings of an {@link Inbox}; every process that touches one user's inbox must use the same ones. */
export interface InboxOptions {
  /** Key prefix, without braces. Default {@link DEFAULT_INBOX_PREFIX}. */
  prefix?: string;
  /** Notifications kept per user; older ones are trimmed on the next append. Default 1000. */
  maxLength?: number;
  /** Notifications older than this (ms) are trimmed on the next append. Default 30 days. */
  maxAgeMs?: number;
  /**
   * How long (ms) past `maxAgeMs` a notification's marker (its status, and the worker's idempotency
   * marker) and its id index live, trimmed or not: every key's TTL is `maxAgeMs` + this. Default 1 day.
   * It must cover the longest a job can run again after its first append (stalled lock, retries).
   */
  recordGraceMs?: number;
  /** The tenant whose inboxes this instance reads and writes. Default `default` (see `tenantPrefix`). */
  tenantId?: string;
}

/** Per-call bounds of one append, at most the inbox's own (a tenant's API key may keep less). */
export interface AppendBounds {
  maxLength?: number | undefined;
  maxAgeMs?: number | undefined;
}

/** What the worker stores: a notification without its offset (the inbox assigns it). */
export type InboxNotification = Omit<NotificationEvent, 'offset'>;

/** What muted a notification: the user muted its topic, or its type. */
export type MuteTarget = { topic: string } | { type: string };

/** Outcome of {@link Inbox.append}. */
export type AppendResult =
  | { outcome: 'appended' | 'already-appended'; offset: InboxOffset; unread: UnreadEvent }
  | { outcome: 'expired' | 'cancelled'; unread: UnreadEvent }
  | { outcome: 'deduplicated'; duplicateOf: string; unread: UnreadEvent }
  | { outcome: 'muted'; mutedBy: MuteTarget; unread: UnreadEvent };

/** A page read from an inbox, in offset order. */
export interface InboxPage {
  entries: NotificationEvent[];
  /**
   * Some notifications right after `after` are gone (trimmed by length or age): the reader missed them
   * and should reload the inbox. `entries` still holds what follows.
   */
  trimmed: boolean;
  /** `after` is later than anything in the inbox (the inbox was lost, or the offset is another user's). */
  unknownOffset: boolean;
  /** Offset of the last entry of the page, or `after` when the page is empty. */
  lastOffset: InboxOffset;
  /**
   * The page was cut, by its `limit` or by its size ({@link PAGE_BYTES}): more may follow `lastOffset`
   * (read on from it). False: nothing followed when it was read.
   */
  more: boolean;
}

/** One notification as the REST listing shows it. */
export interface InboxItem extends NotificationEvent {
  read: boolean;
  /** ISO time of the first ack by any of the user's clients, or null. */
  deliveredAt: string | null;
}

/** A page of `GET /users/:userId/notifications`. */
export interface InboxListing {
  items: InboxItem[];
  /** Pass as `after` for the next page; null when this page reached the end. */
  nextAfter: InboxOffset | null;
  /** True when notifications right after `after` were trimmed (see {@link InboxPage.trimmed}). */
  trimmed: boolean;
  unread: UnreadEvent;
  /**
   * A page read backwards (`newest` or `before`): pass as `before` for the page before it; null when
   * this page reached the oldest kept. Absent on a page read forwards.
   */
  nextBefore?: InboxOffset | null;
}

/** Answer of {@link Inbox.markRead}. */
export interface ReadResult {
  /** Notifications that went from unread to read in this call. */
  changed: number;
  unread: UnreadEvent;
  /** The ids of those notifications (what their `notification.read` webhooks name). */
  ids: string[];
  /**
   * When, by Redis's clock, ms since the epoch: their `notification.read` webhooks' `at` (never before
   * the `deliveredAt` of an ack that came first, which the same clock stamped).
   */
  readAtMs: number;
}

/** What {@link Inbox.acknowledge} recorded: the notifications acked for the first time, and when. */
export interface AckResult {
  /** The ids whose `deliveredAt` this call wrote (what their `notification.delivered` webhooks name). */
  ids: string[];
  /** That `deliveredAt`, ms since epoch (Redis time). */
  deliveredAtMs: number;
}

/** What Herald knows about one notification (`GET /notifications/:id`). */
export interface NotificationStatus {
  id: string;
  userId: string;
  /**
   * `inbox`: stored and pushed; `expired`: its `ttlMs` passed before delivery; `deduplicated`: collapsed;
   * `cancelled`: cancelled by its sender before the worker stored it; `muted`: not stored, the user muted
   * its topic or type.
   */
  state: 'inbox' | 'expired' | 'deduplicated' | 'cancelled' | 'muted';
  offset: InboxOffset | null;
  /** True once any client of the user acked it. */
  delivered: boolean;
  deliveredAt: string | null;
  /** Realtime instance that recorded the first ack. */
  deliveredBy: string | null;
  read: boolean;
  /** For `deduplicated`: the notification it collapsed into. */
  duplicateOf: string | null;
  /** The sender's tenant, when the job carried one. */
  tenantId: string | null;
  /** For `cancelled`: when it was cancelled (ISO time). */
  cancelledAt?: string;
  /**
   * When its sender's gateway accepted it (ISO time), read from its inbox entry: absent when it is not
   * in the inbox (never stored: expired, deduplicated, cancelled, muted; or trimmed since).
   */
  createdAt?: string;
  /** Its Web Push fallback (`escalateAfterMs`), from the marker's `escalation` field (`@herald/push`). */
  escalation?: EscalationStatus;
  /** For `muted`: the mute that kept it out of the inbox. */
  muted?: MuteTarget;
}

/** Which notifications {@link Inbox.markRead} marks read. */
export type ReadSelection = { ids: string[] } | { all: true; upTo?: InboxOffset };
