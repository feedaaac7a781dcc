import type { ErrorCode } from './error-codes.js';
import type { MutedLists, MuteRequest } from './preferences.js';
import type { PushClientToServerEvents } from './push.js';
import { PRIORITY_MAX } from './schemas.js';
/** Optional delivery settings of a notification, validated by the gateway and honoured by the worker. */
export interface NotificationOptions {
  /**
   * 1 (highest) to 2 097 151 (`PRIORITY_MAX`, the lowest): taken before every notification of a lower
   * priority or none that is waiting; absent = `PRIORITY_MAX` (see {@link DEFAULT_PRIORITY}).
   */
  priority?: number;
  /** Deliver no earlier than this many ms after acceptance (scheduled delivery). */
  delayMs?: number;
  /** Drop the notification if it has not been delivered within this many ms of acceptance. */
  ttlMs?: number;
  /** Notifications to one recipient with the same `dedupeKey` collapse into the first. */
  dedupeKey?: string;
  /** Free-form labels the client may filter on. */
  topic?: string;
  type?: string;
  /** Sent as a Web Push message if no tab acks it within this many ms of being stored (`@herald/push`). */
  escalateAfterMs?: number;
}

/** Data of a BullMQ `notify` job. */
export interface NotificationJob extends NotificationOptions {
  /** Notification id, assigned by the gateway; also the BullMQ job id. */
  id: string;
  userId: string;
  payload: Record<string, unknown>;
  /** ISO 8601 time the gateway accepted the notification. */
  createdAt: string;
  /**
   * Tenant (of the API key) that sent it: the recipient is `(tenantId, userId)`. Absent only in jobs
   * enqueued before tenants existed, which belong to the tenant `default`.
   */
  tenantId?: string;
  /** The sending key's own inbox bounds, when smaller than the deployment's (`herald keys create --inbox-*`). */
  inbox?: { maxLength?: number; maxAgeMs?: number };
  /**
   * The enqueueing gateway process's count of jobs so far: with `createdAt`, the send order the worker
   * keeps for one user's notifications taken together (a batch's items, sends in a row). Absent in
   * older jobs.
   */
  seq?: number;
}

/**
 * Data of a BullMQ `envelope` job: notifications without delay or priority that one gateway accepted
 * within one window, in send order. Each keeps its own id, `createdAt` and `seq`; the worker stores each
 * as it stores a `notify` job, and re-enqueues as a `notify` job of its own any it could not store (so
 * that its retries, failure and status are its own). Where an enveloped notification waits is in the
 * queue's envelope index ({@link envelopeIndexKey}) until its envelope is done.
 */
export interface NotificationEnvelope {
  items: NotificationJob[];
}

/**
 * The hash, in the queue's slot, of notification id → id of the envelope job that carries it, while it
 * does (the gateway writes the fields before it adds the envelope; the worker deletes them once the
 * envelope is done): how `GET /notifications/:id` and `DELETE` find a notification still queued.
 */
export function envelopeIndexKey(queue: { prefix: string; name: string }): string {
  return `${queue.prefix}:${queue.name}:herald-envelopes`;
}

/**
 * The BullMQ priority of a job whose notifications were sent without one: the lowest, `PRIORITY_MAX`
 * (FIFO among themselves, and with those sent with `priority: PRIORITY_MAX`). Every job of the
 * notification and fan-out queues has a priority: BullMQ hands a worker its jobs without one (its `wait`
 * list) before every prioritised job, so a notification sent with `priority: 1` would otherwise wait
 * behind the whole backlog of those sent without one, rather than go first.
 */
export const DEFAULT_PRIORITY = PRIORITY_MAX;

/**
 * BullMQ job options of an envelope: the retry policy of its notifications; kept once done as a
 * notification's job is (an hour, at most 10 000: the dashboard's completed count), and when failed for
 * `herald failed list|retry`.
 */
export function envelopeJobOptions(
  jobId: string,
  retry: RetryPolicy = DEFAULT_RETRY_POLICY,
): {
  jobId: string;
  priority: number;
  attempts: number;
  backoff: { type: 'exponential'; delay: number; jitter: number };
  removeOnComplete: { age: number; count: number };
  removeOnFail: false;
} {
  return {
    jobId,
    // Its notifications have no priority of their own (those that do ride alone).
    priority: DEFAULT_PRIORITY,
    attempts: retry.attempts,
    backoff: { type: 'exponential', delay: retry.backoffMs, jitter: retry.jitter },
    removeOnComplete: { age: 3600, count: 10_000 },
    removeOnFail: false,
  };
}

/**
 * Position of a notification in its user's inbox: the Redis stream entry id `<ms>-<seq>`, where `seq`
 * counts the user's notifications 1, 2, 3, … without holes (so a client or server can tell a gap).
 * Compare offsets with `compareOffsets` from `@herald/inbox`, never as strings.
 */
export type InboxOffset = string;

/** What a browser receives as the `notification` Socket.IO event. */
export interface NotificationEvent {
  id: string;
  /** Where this notification sits in the user's inbox; pass the last one seen as `auth.lastOffset`. */
  offset: InboxOffset;
  userId: string;
  payload: Record<string, unknown>;
  createdAt: string;
  topic?: string;
  type?: string;
  /**
   * Live events only: the user's unread count right after this notification was added (one message
   * instead of a separate `unread` event; a client keeps the highest `version`).
   */
  unread?: UnreadEvent;
}

/** The user's exact unread count; `version` grows with every change, so a client keeps the highest. */
export interface UnreadEvent {
  count: number;
  version: number;
}

/**
 * The `unread` event: the user's new count after a read mark, with the ids that mark changed, so that
 * every device updates its list as well as its badge.
 */
export interface UnreadChangeEvent extends UnreadEvent {
  /** The notifications this change marked read (absent from servers that predate it). */
  read?: string[];
}

/** Sent once per connection, after the replay: everything up to `lastOffset` has been sent. */
export interface SyncedEvent {
  lastOffset: InboxOffset;
  /** How many notifications the replay sent. */
  replayed: number;
  unread: UnreadEvent;
}

/**
 * The offset a client passed is no longer in the inbox (trimmed by length or age, or the inbox was
 * lost): reload the inbox (`GET /users/:userId/notifications`), then carry on from `lastOffset`.
 */
export interface ResyncEvent {
  reason: 'trimmed' | 'unknown-offset';
  /** Live notifications continue after this offset. */
  lastOffset: InboxOffset;
}

/** Why the server is about to close the connection, sent just before it does. */
export interface GoodbyeEvent {
  /**
   * `HERALD_ERR_TOKEN_REVOKED`: the API key that minted the token was revoked (do not reconnect with it);
   * `HERALD_ERR_TOO_MANY_CONNECTIONS`: this user has too many connections on this instance.
   */
  code:
    | typeof ErrorCode.TOKEN_EXPIRED
    | typeof ErrorCode.TOKEN_REVOKED
    | typeof ErrorCode.SERVER_SHUTDOWN
    | typeof ErrorCode.TOO_MANY_CONNECTIONS;
  message: string;
  /** True: reconnect (to any instance) with the same token and `lastOffset`; false: get a new token first. */
  reconnect: boolean;
}

/** Socket.IO events the server sends. */
export interface ServerToClientEvents {
  notification: (event: NotificationEvent) => void;
  unread: (event: UnreadChangeEvent) => void;
  synced: (event: SyncedEvent) => void;
  resync: (event: ResyncEvent) => void;
  goodbye: (event: GoodbyeEvent) => void;
}

/**
 * Answer to `ack`, `read` and `read-all` when the client passes an acknowledgement callback.
 * `retryAfterMs` comes with `code: 'HERALD_ERR_RATE_LIMITED'`: when the command may be sent again.
 */
export type CommandReply =
  | { ok: true; changed: number; unread?: UnreadEvent }
  | { ok: false; error: string; code: string; retryAfterMs?: number };

/** One notification of a listing page, with its read mark and first-ack time. */
export interface InboxListItem extends NotificationEvent {
  read: boolean;
  /** ISO time of the first ack by any of the user's clients, or null. */
  deliveredAt: string | null;
}

/** A page of the user's inbox, oldest first: what `list` answers (the REST listing's shape). */
export interface InboxListPage {
  items: InboxListItem[];
  /** Pass as `after` for the next page; null when this page reached the end. */
  nextAfter: InboxOffset | null;
  /** True when notifications right after `after` were trimmed away. */
  trimmed: boolean;
  unread: UnreadEvent;
  /**
   * A page read backwards (`newest` or `before`): pass as `before` for the page before it; null when
   * this page reached the oldest kept. Absent on a page read forwards.
   */
  nextBefore?: InboxOffset | null;
}

/** Answer to `list`. */
export type ListReply =
  | ({ ok: true } & InboxListPage)
  | { ok: false; error: string; code: string; retryAfterMs?: number };

/**
 * Answer to `preferences`, `mute` and `unmute`: the user's mutes after the call (`changed`: how many this
 * `mute` / `unmute` added or removed).
 */
export type PreferencesReply =
  | { ok: true; preferences: { muted: MutedLists }; changed?: number }
  | { ok: false; error: string; code: string; retryAfterMs?: number };

/**
 * Answer to `topics`, `subscribe` and `unsubscribe`: each topic the token lets the user subscribe to
 * themselves, and whether they are subscribed now.
 */
export type TopicsReply =
  | { ok: true; topics: { topic: string; subscribed: boolean }[] }
  | { ok: false; error: string; code: string; retryAfterMs?: number };

/** Socket.IO events a client sends. Every one acts only on the token's own user. */
export interface ClientToServerEvents extends PushClientToServerEvents {
  /** Records that these notifications reached the screen (`delivered`, once, with time and instance). */
  ack: (body: { ids: string[] }, reply?: (answer: CommandReply) => void) => void;
  /** Marks these notifications read. */
  read: (body: { ids: string[] }, reply?: (answer: CommandReply) => void) => void;
  /** Marks every notification read, or only those up to and including `upTo`. */
  'read-all': (body: { upTo?: InboxOffset }, reply?: (answer: CommandReply) => void) => void;
  /**
   * A page of the user's own inbox, oldest first, `after` exclusive (absent: from the oldest kept),
   * `limit` 1..1000 (default 50): what a browser lists with its user token, without an API key. With
   * `newest: true` or `before` (not with `after`), the page is read backwards: the `limit` newest, or
   * the `limit` just before `before` (exclusive); follow `nextBefore` for older ones.
   */
  list: (
    body: { after?: InboxOffset; before?: InboxOffset | undefined; newest?: boolean; limit?: number },
    reply: (answer: ListReply) => void,
  ) => void;
  /** The user's own mutes. */
  preferences: (body: Record<string, never>, reply: (answer: PreferencesReply) => void) => void;
  /** Mutes topics and / or types for the user: their notifications are no longer stored nor pushed. */
  mute: (body: MuteRequest, reply?: (answer: PreferencesReply) => void) => void;
  /** Unmutes them: notifications sent from then on are stored and pushed again. */
  unmute: (body: MuteRequest, reply?: (answer: PreferencesReply) => void) => void;
  /** The topics the token lets the user subscribe to themselves, each with whether they are subscribed. */
  topics: (body: Record<string, never>, reply: (answer: TopicsReply) => void) => void;
  /** Subscribes the user to one of those topics (`HERALD_ERR_TOPIC_NOT_ALLOWED` for any other). */
  subscribe: (body: { topic: string }, reply?: (answer: TopicsReply) => void) => void;
  /** Unsubscribes the user from one of those topics. */
  unsubscribe: (body: { topic: string }, reply?: (answer: TopicsReply) => void) => void;
}

/** Per-socket data the realtime server keeps after the handshake. */
export interface SocketData {
  userId: string;
  /** The token's tenant: the socket reaches only `(tenantId, userId)`. */
  tenantId: string;
  /** Id of the API key that minted the token (revoking it disconnects the socket). */
  keyId: string;
  /** When the token stops being valid (ms since epoch); the server disconnects the socket then. */
  expiresAtMs: number;
  /** The topics the token lets the user subscribe to themselves (its `top` claim). */
  topics: string[];
}

/** The handshake `auth` object a client passes to `io(url, { auth, transports: ['websocket'] })`. */
export interface HandshakeAuth {
  token: string;
  /**
   * The `offset` of the last notification this client saw. The server first replays everything after
   * it, in order, then continues live. Absent: live only, from now. `'0-0'`: the whole retained inbox.
   */
  lastOffset?: InboxOffset;
}

/** Event names of the protocol, for code that does not use the typed maps. */
export const SocketEvent = {
  NOTIFICATION: 'notification',
  UNREAD: 'unread',
  SYNCED: 'synced',
  RESYNC: 'resync',
  GOODBYE: 'goodbye',
  ACK: 'ack',
  READ: 'read',
  READ_ALL: 'read-all',
  LIST: 'list',
  PREFERENCES: 'preferences',
  MUTE: 'mute',
  UNMUTE: 'unmute',
  TOPICS: 'topics',
  SUBSCRIBE: 'subscribe',
  UNSUBSCRIBE: 'unsubscribe',
} as const;

/** Retry policy of a notification job (BullMQ `attempts` and exponential `backoff` with jitter). */
export interface RetryPolicy {
  attempts: number;
  /** First retry after about this many ms; doubles each attempt. */
  backoffMs: number;
  /** 0..1: each delay is reduced by a random fraction up to this, so retries do not arrive in waves. */
  jitter: number;
}

/** The retry policy Herald uses when none is configured: 8 attempts over about 4 minutes. */
export const DEFAULT_RETRY_POLICY: Readonly<RetryPolicy> = Object.freeze({
  attempts: 8,
  backoffMs: 1000,
  jitter: 0.5,
});

/**
 * BullMQ job options for a notification: the job id is the notification id (so enqueueing twice is a
 * no-op), `delayMs` and `priority` map to BullMQ's `delay` and `priority` (absent:
 * {@link DEFAULT_PRIORITY}), retries back off
 * exponentially with jitter, and failed jobs are kept for `herald failed list|retry`. The job's
 * `timestamp`, from which BullMQ counts `delay`, is its `createdAt` (Redis's clock at the gateway), not
 * the enqueuing machine's `Date.now()`: a gateway 45 s behind made a 20 s delay due at once.
 *
 * @example
 * ```ts
 * await queue.add(NOTIFY_JOB_NAME, job, notificationJobOptions(job));
 * ```
 */
export function notificationJobOptions(
  job: Pick<NotificationJob, 'id' | 'delayMs' | 'priority'> & { createdAt?: string },
  retry: RetryPolicy = DEFAULT_RETRY_POLICY,
): {
  jobId: string;
  timestamp?: number;
  delay?: number;
  priority: number;
  attempts: number;
  backoff: { type: 'exponential'; delay: number; jitter: number };
  removeOnComplete: { age: number; count: number };
  removeOnFail: false;
} {
  const createdAtMs = job.createdAt === undefined ? Number.NaN : Date.parse(job.createdAt);
  return {
    jobId: job.id,
    ...(createdAtMs > 0 ? { timestamp: createdAtMs } : {}),
    ...(job.delayMs !== undefined && job.delayMs > 0 ? { delay: job.delayMs } : {}),
    priority: job.priority ?? DEFAULT_PRIORITY,
    attempts: retry.attempts,
    backoff: { type: 'exponential', delay: retry.backoffMs, jitter: retry.jitter },
    // Completed jobs: an hour or 10 000, whichever is fewer (their record of truth is the inbox).
    removeOnComplete: { age: 3600, count: 10_000 },
    // Failed jobs stay until an operator retries or removes them.
    removeOnFail: false,
  };
}
