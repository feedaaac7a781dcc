import type { InboxListPage, InboxOffset, UnreadEvent } from '@herald/protocol';
import type { BackoffOptions } from './backoff.js';
import type { PushRegistration, PushRegistrationLike } from './push.js';
import type { HeraldItem, InboxSnapshot } from './store.js';
import type { ChannelLike, LockManagerLike } from './tabs.js';

/**
 * - `connecting`: first connection, not live yet;
 * - `live`: connected and caught up (the replay is done): what arrives now is new;
 * - `reconnecting`: the connection dropped; retrying with backoff, resuming from the last offset;
 * - `offline`: the browser says it is offline, or the page is hidden in the back/forward cache, or `close()`;
 * - `unauthorized`: `getToken()` threw `HeraldUnauthorizedError`; nothing retries until `reconnect()`.
 */
export type ConnectionState = 'connecting' | 'live' | 'reconnecting' | 'offline' | 'unauthorized';

/** How a (re)connection caught up, reported on every `synced`. */
export interface ResumeInfo {
  /** True: every notification since the last one seen arrived (or none were missed). */
  recovered: boolean;
  /** True when this connection resumed from an offset (false for the very first one). */
  wasRecovering: boolean;
  /** How many notifications the server replayed. */
  replayed: number;
  /** True when the offset was gone (trimmed): the inbox was reloaded from a snapshot instead. */
  resynced: boolean;
}

/** The whole client state: one immutable object, a new one on every change. */
export interface HeraldState extends InboxSnapshot {
  connection: ConnectionState;
  /** `leader`: this tab holds the user's socket; `follower`: another tab does; `solo`: no tab sharing. */
  role: 'leader' | 'follower' | 'solo';
  lastResume: ResumeInfo | undefined;
  /** The last connection problem (`HERALD_ERR_…` code and message), cleared once live. */
  error: { code: string; message: string } | undefined;
}

/** Events of {@link HeraldClient.on}. */
export interface HeraldEvents {
  /** Every new notification, once per tab, live or replayed (`replayed: true` after a reconnect). */
  notification: [item: HeraldItem, info: { replayed: boolean }];
  /** New live notifications to pop up: in one tab only (the focused one, else the leader). */
  toast: [item: HeraldItem];
  /** Each time the connection is live again: how it caught up. */
  resume: [info: ResumeInfo];
  connection: [state: ConnectionState];
  /** A problem that did not stop the client (a failed list, a listener that threw). */
  error: [error: unknown];
}

/** Settings of {@link createHeraldClient}. */
export interface HeraldClientOptions {
  /** The realtime server (or its load balancer), e.g. `https://rt.example.com`; a function picks per attempt. */
  url: string | (() => string);
  /**
   * A user token from your backend (which gets it from Herald's `POST /tokens`). Called on connect when
   * there is no token, when the server refused it, and before it expires (tokens carry `exp`). Throw
   * {@link HeraldUnauthorizedError} to stop retrying.
   */
  getToken: () => string | Promise<string>;
  /**
   * One socket per browser and user: tabs elect a leader with a Web Lock and share its events over
   * `BroadcastChannel` (default `true` when both exist; without Web Locks each tab keeps its own socket).
   */
  tabs?: boolean;
  /** Web Locks implementation (default `navigator.locks`); `null` disables sharing. */
  locks?: LockManagerLike | null;
  /** `BroadcastChannel` factory (default the global one). */
  channel?: (name: string) => ChannelLike;
  /** Resume from here on the first connection (e.g. saved in `sessionStorage`). */
  lastOffset?: InboxOffset;
  /** Notifications kept in memory, newest kept (default 200). */
  maxItems?: number;
  /** Reconnect backoff (default full jitter 0.5 → 20 s). */
  backoff?: BackoffOptions;
  /** Leader heartbeat (ms, default 2000) and how long a follower waits before stealing (default 6000). */
  heartbeatMs?: number;
  leaderTimeoutMs?: number;
  /** Acks of shown notifications are sent in batches: after this long (ms, default 250) or this many (20). */
  ackDelayMs?: number;
  ackBatch?: number;
  /** Extra slack over the server's `pingInterval + pingTimeout` before a silent socket is killed (ms, 2000). */
  watchdogSlackMs?: number;
  /** How long a command waits for the server (ms, default 10 000). */
  timeoutMs?: number;
  /** The page whose lifecycle events (online, visibility, pageshow/pagehide) drive reconnects; default `globalThis`. */
  page?: PageLike | null;
  /** Debug logging (default none). */
  log?: (message: string, data?: Record<string, unknown>) => void;
}

/** Something to listen to (`window`, `document`). */
export interface PageTarget {
  addEventListener(type: string, listener: (event: Event) => void): void;
  removeEventListener(type: string, listener: (event: Event) => void): void;
}

/** The part of `window` (and its `document`) the client listens to. */
export interface PageLike extends PageTarget {
  document?: Partial<PageTarget> & { visibilityState?: string; hasFocus?: () => boolean };
  navigator?: { onLine?: boolean };
}

/** A topic or a notification type to mute or unmute. */
export type MuteTarget = { topic: string } | { type: string };

/** A user's preferences: the topics and types they muted. */
export interface HeraldPreferences {
  muted: { topics: string[]; types: string[] };
}

/** A topic the token lets the user subscribe to themselves, and whether they are. */
export interface TopicSubscription {
  topic: string;
  subscribed: boolean;
}

/** The browser/Node client: see {@link createHeraldClient}. */
export interface HeraldClient {
  /** Calls `listener` after every state change; answers the unsubscribe function (`useSyncExternalStore`'s contract). */
  subscribe(listener: (state: HeraldState) => void): () => void;
  /** The current state (the same object until something changes). */
  getState(): HeraldState;
  on<Name extends keyof HeraldEvents>(
    name: Name,
    listener: (...args: HeraldEvents[Name]) => void,
  ): () => void;
  /** A page of the inbox, oldest first, `after` exclusive (the offset is the cursor). */
  list(options?: {
    after?: InboxOffset;
    before?: InboxOffset;
    newest?: boolean;
    limit?: number;
  }): Promise<InboxListPage>;
  /** Marks notifications read (idempotent); every tab and device gets the new exact count. */
  markRead(ids: readonly string[]): Promise<{ changed: number; unread?: UnreadEvent }>;
  /**
   * Marks read everything up to and including `upTo`, by default the last offset this client has: a
   * notification stored meanwhile, still on its way to the screen, stays unread.
   */
  markAllRead(upTo?: InboxOffset): Promise<{ changed: number; unread?: UnreadEvent }>;
  /** Records that notifications were shown (acks, batched: they feed delivery status and latency). */
  shown(ids: readonly string[]): void;
  /**
   * Web Push fallback: subscribes this browser through `registration.pushManager` with the deployment's
   * VAPID key (asked of the server unless given) and registers it for the user, so that a notification
   * sent with `escalateAfterMs` that no tab acks in time reaches it as a push message.
   */
  registerPush(options: {
    registration: PushRegistrationLike;
    vapidPublicKey?: string;
  }): Promise<PushRegistration>;
  /**
   * The deployment's VAPID public key (base64url), from the server (`push-key`): whether Web Push is on
   * there at all. Rejects with `HERALD_ERR_PUSH_NOT_CONFIGURED` when it is off.
   */
  pushPublicKey(): Promise<string>;
  /** Removes this browser's push subscription from the user's and unsubscribes it (sign-out). */
  unregisterPush(options: { registration: PushRegistrationLike }): Promise<boolean>;
  /** Drops the inbox held and reloads it from the server (what the client does on `resync`). */
  resync(): Promise<void>;
  /** What the user muted: `{ muted: { topics, types } }`, each list in byte order. */
  preferences(): Promise<HeraldPreferences>;
  /**
   * Mutes a topic or a notification type for this user (every device): from then on its notifications
   * are not stored nor pushed (those in the inbox stay). Answers the preferences after the change;
   * `HERALD_ERR_TOO_MANY_MUTES` past 1,000 mutes.
   */
  mute(target: MuteTarget): Promise<HeraldPreferences>;
  /** Unmutes a topic or type: notifications sent from then on are stored and pushed again. */
  unmute(target: MuteTarget): Promise<HeraldPreferences>;
  /**
   * The topics this user may subscribe to themselves (those the backend put in the token, `POST /tokens`
   * `topics`), each with whether they are subscribed.
   */
  topics(): Promise<TopicSubscription[]>;
  /**
   * Subscribes the user to one of those topics (`HERALD_ERR_TOPIC_NOT_ALLOWED` for any other). Named
   * apart from `subscribe(listener)`, the state store's. Answers {@link HeraldClient.topics}' list.
   */
  subscribeTopic(topic: string): Promise<TopicSubscription[]>;
  /** Unsubscribes the user from one of those topics. */
  unsubscribeTopic(topic: string): Promise<TopicSubscription[]>;
  /** Reconnects now (after `unauthorized`, or to skip the backoff). */
  reconnect(): void;
  /** Closes the socket, leaves the tab election, removes every listener. */
  close(): void;
}
