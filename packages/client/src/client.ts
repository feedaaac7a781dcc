import type {
  ClientToServerEvents,
  CommandReply,
  GoodbyeEvent,
  InboxListPage,
  InboxOffset,
  ListReply,
  NotificationEvent,
  ResyncEvent,
  ServerToClientEvents,
  SyncedEvent,
  UnreadEvent,
} from '@herald/protocol';
import { io, type Socket } from 'socket.io-client';
import { type BackoffOptions, backoffDelay } from './backoff.js';
import { Emitter } from './emitter.js';
import { HeraldError, HeraldUnauthorizedError } from './errors.js';
import { compareOffsets } from './offsets.js';
import { type HeraldItem, type InboxSnapshot, InboxStore } from './store.js';
import { type ChannelLike, type LockManagerLike, TabElection, type TabMessage } from './tabs.js';
import { refreshDelay, tokenClaims } from './token.js';

type HeraldSocket = Socket<ServerToClientEvents, ClientToServerEvents>;

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
  list(options?: { after?: InboxOffset; limit?: number }): Promise<InboxListPage>;
  /** Marks notifications read (idempotent); every tab and device gets the new exact count. */
  markRead(ids: readonly string[]): Promise<{ changed: number; unread?: UnreadEvent }>;
  /** Marks everything read, or up to and including `upTo`. */
  markAllRead(upTo?: InboxOffset): Promise<{ changed: number; unread?: UnreadEvent }>;
  /** Records that notifications were shown (acks, batched: they feed delivery status and latency). */
  shown(ids: readonly string[]): void;
  /** Drops the inbox held and reloads it from the server (what the client does on `resync`). */
  resync(): Promise<void>;
  /** Reconnects now (after `unauthorized`, or to skip the backoff). */
  reconnect(): void;
  /** Closes the socket, leaves the tab election, removes every listener. */
  close(): void;
}

/**
 * Creates a client for one user: it connects to Herald's realtime servers, keeps the user's inbox and
 * exact unread count, resumes from the last offset on every reconnect (whichever instance it lands on)
 * and shares one socket between the user's tabs.
 *
 * @example
 * ```ts
 * const herald = createHeraldClient({
 *   url: 'https://rt.example.com',
 *   getToken: async () => (await (await fetch('/api/herald-token', { method: 'POST' })).json()).token,
 * });
 * herald.subscribe((state) => render(state.items, state.unread?.count, state.connection));
 * herald.on('toast', (item) => showToast(item.payload));
 * await herald.markAllRead();
 * ```
 */
export function createHeraldClient(options: HeraldClientOptions): HeraldClient {
  return new Client(options);
}

interface Pending {
  resolve(value: unknown): void;
  reject(error: unknown): void;
  op: string;
  args: unknown;
  timer: ReturnType<typeof setTimeout>;
}

const TOKEN_CODES = new Set([
  'HERALD_ERR_TOKEN_MISSING',
  'HERALD_ERR_TOKEN_INVALID',
  'HERALD_ERR_TOKEN_EXPIRED',
  'HERALD_ERR_TOKEN_REVOKED',
]);

class Client implements HeraldClient {
  readonly #options: HeraldClientOptions;
  readonly #store: InboxStore;
  readonly #events: Emitter<HeraldEvents>;
  readonly #listeners = new Set<(state: HeraldState) => void>();
  readonly #page: PageLike | undefined;
  #state: HeraldState;
  #connection: ConnectionState = 'connecting';
  #role: HeraldState['role'] = 'solo';
  #lastResume: ResumeInfo | undefined;
  #error: HeraldState['error'];
  #closed = false;
  #suspended = false;

  // The socket (leader or solo)
  #socket: HeraldSocket | undefined;
  /** The socket being replaced by `#socket` (token refresh: make before break). */
  #retiring: HeraldSocket | undefined;
  #opening = false;
  #attempt = 0;
  #retryTimer: ReturnType<typeof setTimeout> | undefined;
  #refreshTimer: ReturnType<typeof setTimeout> | undefined;
  #watchdog: ReturnType<typeof setInterval> | undefined;
  #lastServerPing = 0;
  #silenceLimitMs = 0;
  #token: string | undefined;
  #tokenRefused = false;
  #needSnapshot = true;
  #snapshotLoading: Promise<void> | undefined;
  #fillLoading = false;

  // Tabs
  #tabs: TabElection | undefined;
  #tabsName: string | undefined;
  #pending = new Map<string, Pending>();
  #nextRequest = 0;
  #focusedTab: string | undefined;

  // Acks
  #ackQueue = new Set<string>();
  #acked = new Set<string>();
  #ackTimer: ReturnType<typeof setTimeout> | undefined;

  readonly #pageListeners: [PageTarget, string, (event: Event) => void][] = [];
  readonly #locks: LockManagerLike | undefined;
  readonly #makeChannel: ((name: string) => ChannelLike) | undefined;

  constructor(options: HeraldClientOptions) {
    this.#options = options;
    this.#store = new InboxStore({ maxItems: options.maxItems ?? 200 });
    if (options.lastOffset) this.#store.advanceTo(options.lastOffset);
    this.#events = new Emitter((error) => this.#log('listener threw', { error: String(error) }));
    const page = options.page === undefined ? (globalThis as unknown as PageLike) : options.page;
    this.#page = page && typeof page.addEventListener === 'function' ? page : undefined;
    this.#locks =
      options.tabs === false
        ? undefined
        : options.locks === undefined
          ? (globalThis as { navigator?: { locks?: LockManagerLike } }).navigator?.locks
          : (options.locks ?? undefined);
    this.#makeChannel =
      options.channel ??
      (typeof BroadcastChannel === 'function'
        ? (name: string) => new BroadcastChannel(name) as unknown as ChannelLike
        : undefined);
    // Without Web Locks (insecure context, Node 20) this tab keeps its own socket and rebroadcasts nothing.
    this.#role = this.#locks && this.#makeChannel ? 'follower' : 'solo';
    this.#state = this.#buildState();
    this.#listenToPage();
    void this.#start();
  }

  subscribe(listener: (state: HeraldState) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  getState(): HeraldState {
    return this.#state;
  }

  on<Name extends keyof HeraldEvents>(
    name: Name,
    listener: (...args: HeraldEvents[Name]) => void,
  ): () => void {
    return this.#events.on(name, listener);
  }

  list(options: { after?: InboxOffset; limit?: number } = {}): Promise<InboxListPage> {
    return this.#run('list', options) as Promise<InboxListPage>;
  }

  markRead(ids: readonly string[]): Promise<{ changed: number; unread?: UnreadEvent }> {
    return this.#run('read', { ids: [...ids] }) as Promise<{ changed: number; unread?: UnreadEvent }>;
  }

  markAllRead(upTo?: InboxOffset): Promise<{ changed: number; unread?: UnreadEvent }> {
    return this.#run('read-all', upTo === undefined ? {} : { upTo }) as Promise<{
      changed: number;
      unread?: UnreadEvent;
    }>;
  }

  shown(ids: readonly string[]): void {
    for (const id of ids) if (!this.#acked.has(id)) this.#ackQueue.add(id);
    if (this.#ackQueue.size === 0) return;
    if (this.#ackQueue.size >= (this.#options.ackBatch ?? 20)) this.#flushAcks();
    else this.#ackTimer ??= setTimeout(() => this.#flushAcks(), this.#options.ackDelayMs ?? 250);
  }

  async resync(): Promise<void> {
    if (this.#role === 'follower') {
      await this.#request('resync', {});
      return;
    }
    this.#store.clear();
    this.#needSnapshot = true;
    await this.#loadSnapshot(this.#socket, undefined, true);
  }

  reconnect(): void {
    if (this.#closed) return;
    if (this.#connection === 'unauthorized') {
      this.#token = undefined;
      this.#setConnection(this.#lastResume ? 'reconnecting' : 'connecting');
    }
    this.#attempt = 0;
    if (this.#role !== 'solo' && !this.#tabs) {
      void this.#start();
      return;
    }
    if (this.#role === 'follower') {
      this.#tabs?.check();
      return;
    }
    if (this.#socket?.connected && this.#connection === 'live') return;
    this.#dropSocket();
    void this.#open();
  }

  close(): void {
    if (this.#closed) return;
    this.#flushAcks();
    this.#closed = true;
    this.#stopSocket();
    this.#tabs?.close();
    this.#tabs = undefined;
    for (const [target, type, listener] of this.#pageListeners) target.removeEventListener(type, listener);
    for (const pending of this.#pending.values()) {
      clearTimeout(pending.timer);
      pending.reject(new HeraldError('HERALD_ERR_CLOSED', 'The client was closed.'));
    }
    this.#pending.clear();
    this.#setConnection('offline');
    this.#events.clear();
    this.#listeners.clear();
  }

  // ---- start, tabs ----------------------------------------------------------------------------

  async #start(): Promise<void> {
    const locks = this.#locks;
    const makeChannel = this.#makeChannel;
    if (this.#role === 'solo' || !locks || !makeChannel) {
      await this.#open();
      return;
    }
    // The lock is per user: a token tells who (another user of this browser gets another leader).
    let token: string;
    for (;;) {
      try {
        token = await this.#getToken();
        break;
      } catch (error) {
        if (this.#closed || error instanceof HeraldUnauthorizedError) {
          this.#tokenFailed(error);
          return;
        }
        this.#events.emit('error', error);
        await new Promise((resolve) =>
          setTimeout(resolve, backoffDelay(this.#attempt++, this.#options.backoff)),
        );
      }
    }
    if (this.#closed || this.#tabs) return;
    const claims = tokenClaims(token);
    const url = typeof this.#options.url === 'string' ? this.#options.url : 'herald';
    this.#tabsName = `herald:v1:${url}:${claims.tid ?? ''}/${claims.sub ?? ''}`;
    this.#tabs = new TabElection({
      name: this.#tabsName,
      locks,
      channel: makeChannel(this.#tabsName),
      heartbeatMs: this.#options.heartbeatMs ?? 2000,
      leaderTimeoutMs: this.#options.leaderTimeoutMs ?? 6000,
      maySteal: () => this.#visible(),
      onLead: () => this.#lead(),
      onFollow: () => this.#follow(),
      onMessage: (message) => this.#onTabMessage(message),
    });
    this.#tabs.start();
    this.#follow();
  }

  #lead(): void {
    if (this.#closed) return;
    this.#log('leading');
    this.#role = 'leader';
    this.#emitState();
    this.#attempt = 0;
    void this.#open();
    // Requests a follower sent to the old leader are answered by us now: followers resend them.
    this.#tabs?.post({ t: 'state', state: this.#shareableState() });
  }

  #follow(): void {
    if (this.#closed) return;
    const wasLeader = this.#role === 'leader';
    this.#role = 'follower';
    this.#stopSocket();
    if (wasLeader) this.#log('stepped down');
    this.#tabs?.post({ t: 'hello' });
    this.#emitState();
  }

  #onTabMessage(message: TabMessage): void {
    const leading = this.#role === 'leader';
    switch (message.t) {
      case 'hello':
        if (leading) this.#tabs?.post({ t: 'state', to: message.from, state: this.#shareableState() });
        return;
      case 'lead':
        // A new leader: resend what the old one did not answer.
        for (const [id, pending] of this.#pending)
          this.#tabs?.post({ t: 'req', id, op: pending.op, args: pending.args });
        return;
      case 'focus':
        this.#focusedTab = message.from;
        return;
      case 'req':
        if (leading) void this.#answer(message);
        return;
      case 'ack':
        if (leading) this.shown(message.ids as string[]);
        return;
    }
    if (leading) return;
    // What the leader shares with its followers.
    switch (message.t) {
      case 'state': {
        if (message.to !== undefined && message.to !== this.#tabs?.id) return;
        const state = message.state as SharedState;
        const before = this.#store.lastOffset;
        if (state.reset) this.#store.clear();
        this.#store.setUnread(state.unread);
        // Only what is newer than this tab had is news; the rest is history (a first state, a reload).
        for (const item of this.#store.merge(state.items))
          if (before !== undefined && compareOffsets(item.offset, before) > 0)
            this.#emitNotification(item, true, false);
        this.#needSnapshot = false;
        if (state.lastOffset) this.#store.advanceTo(state.lastOffset);
        this.#lastResume = state.lastResume;
        this.#setConnection(state.connection, false);
        this.#emitState();
        return;
      }
      case 'n': {
        const event = message.event as NotificationEvent;
        const outcome = this.#store.add(event);
        this.#store.setUnread(event.unread);
        if (outcome.kind === 'duplicate') {
          this.#emitState();
          return;
        }
        // A gap can only mean this tab missed the leader's messages: ask for its whole state.
        if (outcome.kind === 'gap') this.#tabs?.post({ t: 'hello' });
        this.#emitNotification(
          this.#itemOf(event.offset) ?? { ...event, read: false },
          message.replayed === true,
          message.toast === this.#tabs?.id,
        );
        this.#emitState();
        return;
      }
      case 'unread':
        if (this.#store.setUnread(message.unread as UnreadEvent)) this.#emitState();
        return;
      case 'read':
        this.#store.markRead(message.ids as string[]);
        this.#store.setUnread(message.unread as UnreadEvent | undefined);
        this.#emitState();
        return;
      case 'read-all':
        this.#store.markAllRead(message.upTo as InboxOffset | undefined);
        this.#store.setUnread(message.unread as UnreadEvent | undefined);
        this.#emitState();
        return;
      case 'conn':
        this.#lastResume = (message.lastResume as ResumeInfo | undefined) ?? this.#lastResume;
        this.#setConnection(message.connection as ConnectionState, false);
        if (message.resume) this.#events.emit('resume', message.resume as ResumeInfo);
        return;
      case 'res': {
        if (message.to !== this.#tabs?.id) return;
        const pending = this.#pending.get(message.id as string);
        if (!pending) return;
        this.#pending.delete(message.id as string);
        clearTimeout(pending.timer);
        if (message.ok) pending.resolve(message.value);
        else {
          const error = message.error as { code: string; message: string };
          pending.reject(new HeraldError(error.code, error.message));
        }
        return;
      }
    }
  }

  async #answer(message: TabMessage): Promise<void> {
    const reply = (body: Record<string, unknown>) =>
      this.#tabs?.post({ t: 'res', to: message.from, id: message.id, ...body });
    try {
      const value =
        message.op === 'resync' ? await this.resync() : await this.#run(message.op as string, message.args);
      reply({ ok: true, value });
    } catch (error) {
      const { code = 'HERALD_ERR_UNAVAILABLE', message: text = String(error) } = error as HeraldError;
      reply({ ok: false, error: { code, message: text } });
    }
  }

  #shareableState(reset = false): SharedState {
    const snapshot = this.#store.snapshot();
    return {
      items: [...snapshot.items],
      unread: snapshot.unread,
      lastOffset: snapshot.lastOffset,
      connection: this.#connection,
      lastResume: this.#lastResume,
      reset,
    };
  }

  /** A command: through this tab's socket (leader, solo) or the leader's (follower). */
  async #run(op: string, args: unknown): Promise<unknown> {
    if (this.#closed) throw new HeraldError('HERALD_ERR_CLOSED', 'The client was closed.');
    if (this.#role === 'follower') return this.#request(op, args);
    const socket = await this.#liveSocket();
    const reply = (await socket
      .timeout(this.#options.timeoutMs ?? 10_000)
      .emitWithAck(op as 'read', args as { ids: string[] })
      .catch((error: unknown) => {
        throw new HeraldError('HERALD_ERR_TIMEOUT', `Herald did not answer ${op} in time: retry.`, {
          cause: error,
        });
      })) as CommandReply | ListReply;
    if (!reply.ok)
      throw new HeraldError(reply.code, reply.error, {
        ...(reply.retryAfterMs !== undefined ? { retryAfterMs: reply.retryAfterMs } : {}),
      });
    const { ok: _ok, ...value } = reply;
    if (op === 'read' || op === 'read-all') {
      const result = value as { changed: number; unread?: UnreadEvent };
      const body = args as { ids?: string[]; upTo?: InboxOffset };
      if (op === 'read') this.#store.markRead(body.ids ?? []);
      else this.#store.markAllRead(body.upTo);
      this.#store.setUnread(result.unread);
      this.#tabs?.post({ t: op, ids: body.ids, upTo: body.upTo, unread: result.unread });
      this.#emitState();
    }
    return value;
  }

  #request(op: string, args: unknown): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const id = `${this.#tabs?.id}:${this.#nextRequest++}`;
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new HeraldError('HERALD_ERR_TIMEOUT', `No leader tab answered ${op} in time: retry.`));
      }, this.#options.timeoutMs ?? 10_000);
      this.#pending.set(id, { resolve, reject, op, args, timer });
      this.#tabs?.post({ t: 'req', id, op, args });
    });
  }

  /** The socket once it is live (commands wait through a reconnect rather than fail at once). */
  async #liveSocket(): Promise<HeraldSocket> {
    const deadline = Date.now() + (this.#options.timeoutMs ?? 10_000);
    for (;;) {
      const socket = this.#socket;
      if (socket?.connected) return socket;
      if (this.#closed || this.#connection === 'unauthorized')
        throw new HeraldError('HERALD_ERR_NOT_CONNECTED', `Not connected (${this.#connection}).`);
      if (Date.now() > deadline)
        throw new HeraldError('HERALD_ERR_TIMEOUT', 'Not connected to Herald in time: retry.');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  // ---- the socket -----------------------------------------------------------------------------

  async #getToken(): Promise<string> {
    const claims = this.#token ? tokenClaims(this.#token) : undefined;
    const fresh = claims && !this.#tokenRefused && (refreshDelay(claims) ?? 1) > 0;
    if (this.#token && fresh) return this.#token;
    const token = await this.#options.getToken();
    if (typeof token !== 'string' || token.length === 0)
      throw new HeraldError('HERALD_ERR_TOKEN_MISSING', 'getToken() returned no token.');
    this.#token = token;
    this.#tokenRefused = false;
    return token;
  }

  #tokenFailed(error: unknown): void {
    if (error instanceof HeraldUnauthorizedError) {
      this.#error = { code: error.code, message: error.message };
      this.#stopSocket();
      this.#setConnection('unauthorized');
      return;
    }
    this.#error = {
      code: 'HERALD_ERR_TOKEN_UNAVAILABLE',
      message: String((error as Error)?.message ?? error),
    };
    this.#events.emit('error', error);
    this.#scheduleRetry();
  }

  /** Opens a socket that resumes from the last offset seen; `replacing` stays until the new one is synced. */
  async #open(replacing?: HeraldSocket): Promise<void> {
    if (this.#closed || this.#suspended || this.#opening || this.#role === 'follower') return;
    if (this.#socket && !replacing) return;
    this.#opening = true;
    clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
    let token: string;
    try {
      token = await this.#getToken();
    } catch (error) {
      this.#opening = false;
      this.#tokenFailed(error);
      return;
    }
    this.#opening = false;
    // The role may have changed while the token was fetched (this tab stepped down).
    if (this.#closed || this.#suspended || (this.#role as HeraldState['role']) === 'follower') return;
    if (this.#socket && !replacing) return;
    const lastOffset = this.#store.lastOffset;
    const url = typeof this.#options.url === 'string' ? this.#options.url : this.#options.url();
    this.#log('connecting', { url, lastOffset });
    const socket: HeraldSocket = io(url, {
      auth: { token, ...(lastOffset !== undefined ? { lastOffset } : {}) },
      transports: ['websocket'],
      reconnection: false,
      forceNew: true,
      timeout: this.#options.timeoutMs ?? 10_000,
    });
    if (replacing) this.#retiring = replacing;
    this.#socket = socket;
    let goodbye: GoodbyeEvent | undefined;
    const mine = () => socket === this.#socket || socket === this.#retiring;

    socket.io.engine?.on('handshake', (data: { pingInterval?: number; pingTimeout?: number }) => {
      this.#silenceLimitMs =
        (data.pingInterval ?? 25_000) +
        (data.pingTimeout ?? 20_000) +
        (this.#options.watchdogSlackMs ?? 2000);
      this.#lastServerPing = Date.now();
    });
    socket.io.on('ping', () => {
      if (socket !== this.#socket) return;
      this.#lastServerPing = Date.now();
      this.#tabs?.beat();
    });
    socket.on('notification', (event) => {
      if (mine()) this.#onStream(event);
    });
    socket.on('unread', (unread) => {
      if (!mine()) return;
      if (this.#store.setUnread(unread)) this.#emitState();
      this.#tabs?.post({ t: 'unread', unread });
    });
    socket.on('synced', (synced) => {
      if (socket === this.#socket) this.#onSynced(synced, lastOffset !== undefined, socket);
    });
    socket.on('resync', (resync) => {
      if (socket === this.#socket) this.#onResync(resync, socket);
    });
    socket.on('goodbye', (event) => {
      goodbye = event;
    });
    socket.on('connect_error', (error: Error & { data?: { code?: string; retryAfterMs?: number } }) => {
      if (socket !== this.#socket) return;
      const code = error.data?.code ?? 'HERALD_ERR_CONNECT';
      this.#log('connect_error', { code, message: error.message });
      this.#error = { code, message: error.message };
      if (TOKEN_CODES.has(code)) this.#tokenRefused = true;
      this.#socketLost(socket, error.data?.retryAfterMs);
    });
    socket.on('disconnect', (reason) => {
      this.#log('disconnect', { reason, goodbye: goodbye?.code });
      if (goodbye && !goodbye.reconnect) this.#tokenRefused = true;
      if (goodbye) this.#error = { code: goodbye.code, message: goodbye.message };
      if (socket === this.#retiring) {
        this.#retiring = undefined;
        return;
      }
      if (socket !== this.#socket) return;
      // A planned shutdown: another instance takes us at once (the first retry is still jittered).
      if (goodbye?.code === 'HERALD_SERVER_SHUTDOWN') this.#attempt = 0;
      this.#socketLost(socket);
    });
    this.#startWatchdog();
  }

  #onStream(event: NotificationEvent): void {
    const outcome = this.#store.add(event);
    this.#store.setUnread(event.unread);
    if (outcome.kind === 'duplicate') {
      this.#emitState();
      return;
    }
    // Before `synced` it is the replay; once live (the old socket of a token refresh included) it is new.
    const replayed = this.#connection !== 'live';
    const toastTab = replayed ? undefined : this.#toastTab();
    this.#tabs?.post({ t: 'n', event, replayed, toast: toastTab });
    if (outcome.kind === 'gap') void this.#fill(outcome.after, outcome.before);
    this.#emitNotification(
      this.#itemOf(event.offset) ?? { ...event, read: false },
      replayed,
      !replayed && (toastTab === undefined || toastTab === this.#tabs?.id),
    );
    this.#emitState();
  }

  #onSynced(synced: SyncedEvent, wasRecovering: boolean, socket: HeraldSocket): void {
    this.#attempt = 0;
    this.#error = undefined;
    this.#store.advanceTo(synced.lastOffset);
    this.#store.setUnread(synced.unread);
    // Replayed notifications carry no count: after a replay alone, this is the count the other tabs
    // would never hear (they keep the highest version, so sending it again is harmless).
    this.#tabs?.post({ t: 'unread', unread: synced.unread });
    const retiring = this.#retiring;
    this.#retiring = undefined;
    retiring?.disconnect();
    retiring?.removeAllListeners();
    const finish = () => {
      const resynced = this.#lastResume?.resynced === true && this.#resyncedOn === socket;
      const info: ResumeInfo = {
        recovered: wasRecovering && !resynced,
        wasRecovering,
        replayed: synced.replayed,
        resynced,
      };
      this.#lastResume = info;
      this.#setConnection('live', false);
      this.#tabs?.post({ t: 'conn', connection: 'live', resume: info, lastResume: info });
      this.#events.emit('resume', info);
      this.#emitState();
      this.#scheduleRefresh();
      this.#flushAcks();
    };
    if (this.#needSnapshot && !this.#resyncPending) {
      // First connection of this client: the history comes from a listing (with read marks), up to the
      // offset the stream starts after; what follows arrives on the stream.
      void this.#loadSnapshot(socket, synced.lastOffset).then(finish);
    } else if (this.#resyncPending) {
      void this.#resyncPending.then(finish);
    } else finish();
  }

  #resyncedOn: HeraldSocket | undefined;
  #resyncPending: Promise<void> | undefined;

  #onResync(resync: ResyncEvent, socket: HeraldSocket): void {
    this.#log('resync', { reason: resync.reason, lastOffset: resync.lastOffset });
    this.#store.clear();
    this.#store.advanceTo(resync.lastOffset);
    this.#needSnapshot = true;
    this.#resyncedOn = socket;
    this.#lastResume = { recovered: false, wasRecovering: true, replayed: 0, resynced: true };
    this.#resyncPending = this.#loadSnapshot(socket, resync.lastOffset).finally(() => {
      this.#resyncPending = undefined;
    });
  }

  /** Reloads the inbox (oldest first, keeping the newest `maxItems`) up to `upTo`, silently. */
  #loadSnapshot(
    socket: HeraldSocket | undefined,
    upTo: InboxOffset | undefined,
    rethrow = false,
  ): Promise<void> {
    this.#snapshotLoading ??= (async () => {
      try {
        let after: InboxOffset | undefined;
        for (let page = 0; page < 20; page++) {
          const listing = (await this.#runOn(socket, 'list', {
            ...(after ? { after } : {}),
            limit: 1000,
          })) as InboxListPage;
          const items =
            upTo === undefined
              ? listing.items
              : listing.items.filter((item) => compareOffsets(item.offset, upTo) <= 0);
          this.#store.merge(items);
          this.#store.setUnread(listing.unread);
          if (listing.nextAfter === null || items.length < listing.items.length) break;
          after = listing.nextAfter;
        }
        this.#needSnapshot = false;
        this.#tabs?.post({ t: 'state', state: this.#shareableState(true) });
        this.#emitState();
      } finally {
        this.#snapshotLoading = undefined;
      }
    })();
    const loading = this.#snapshotLoading;
    // resync() tells its caller; the client's own reloads report on `error` and go on.
    return rethrow ? loading : loading.catch((error: unknown) => this.#events.emit('error', error));
  }

  /** Reads the notifications between two offsets from the inbox (a gap on the stream). */
  async #fill(after: InboxOffset, before: InboxOffset): Promise<void> {
    if (this.#fillLoading) return;
    this.#fillLoading = true;
    try {
      const listing = (await this.#runOn(this.#socket, 'list', { after, limit: 1000 })) as InboxListPage;
      const missing = listing.items.filter((item) => compareOffsets(item.offset, before) < 0);
      for (const item of this.#store.merge(missing)) {
        this.#tabs?.post({ t: 'n', event: item, replayed: true });
        this.#emitNotification(item, true, false);
      }
      this.#emitState();
    } catch (error) {
      this.#events.emit('error', error);
    } finally {
      this.#fillLoading = false;
    }
  }

  async #runOn(socket: HeraldSocket | undefined, op: 'list', args: unknown): Promise<unknown> {
    if (!socket) throw new HeraldError('HERALD_ERR_NOT_CONNECTED', 'Not connected.');
    const reply = (await socket
      .timeout(this.#options.timeoutMs ?? 10_000)
      .emitWithAck(op, args as { after?: string })) as ListReply;
    if (!reply.ok) throw new HeraldError(reply.code, reply.error);
    const { ok: _ok, ...page } = reply;
    return page;
  }

  #socketLost(socket: HeraldSocket, retryAfterMs?: number): void {
    if (socket === this.#socket) {
      this.#socket = undefined;
      socket.disconnect();
      socket.removeAllListeners();
      socket.io.removeAllListeners();
    }
    // A refresh in progress whose new socket failed: the old one is still live.
    if (this.#retiring?.connected) {
      this.#socket = this.#retiring;
      this.#retiring = undefined;
      this.#scheduleRefresh(5000);
      return;
    }
    if (this.#closed || this.#suspended || this.#role === 'follower') return;
    this.#setConnection(this.#offline() ? 'offline' : 'reconnecting');
    this.#scheduleRetry(retryAfterMs);
  }

  #scheduleRetry(atLeastMs = 0): void {
    if (this.#closed || this.#suspended || this.#retryTimer || this.#connection === 'unauthorized') return;
    if (this.#offline()) {
      this.#setConnection('offline');
      return; // `online` retries
    }
    const delay = Math.max(atLeastMs, backoffDelay(this.#attempt++, this.#options.backoff));
    this.#log('retry', { delay, attempt: this.#attempt });
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = undefined;
      void this.#open();
    }, delay);
  }

  #scheduleRefresh(overrideMs?: number): void {
    clearTimeout(this.#refreshTimer);
    const delay = overrideMs ?? (this.#token ? refreshDelay(tokenClaims(this.#token)) : undefined);
    if (delay === undefined) return;
    this.#refreshTimer = setTimeout(() => {
      const current = this.#socket;
      if (!current?.connected || this.#closed) return;
      this.#log('refreshing token');
      this.#tokenRefused = true; // fetch a new one
      void this.#open(current);
    }, delay);
  }

  #startWatchdog(): void {
    clearInterval(this.#watchdog);
    this.#watchdog = setInterval(() => this.#checkWatchdog(), 1000);
  }

  /** Kills a socket that stopped receiving server pings (a zombie after sleep, a dead path). */
  #checkWatchdog(): void {
    const socket = this.#socket;
    if (!socket?.connected || this.#silenceLimitMs === 0) return;
    if (Date.now() - this.#lastServerPing <= this.#silenceLimitMs) return;
    this.#log('watchdog: no server ping', { silentMs: Date.now() - this.#lastServerPing });
    this.#error = { code: 'HERALD_ERR_PING_TIMEOUT', message: 'The server stopped answering: reconnecting.' };
    this.#socketLost(socket);
  }

  #dropSocket(): void {
    const socket = this.#socket;
    this.#socket = undefined;
    if (socket) {
      socket.disconnect();
      socket.removeAllListeners();
      socket.io.removeAllListeners();
    }
  }

  #stopSocket(): void {
    clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
    clearTimeout(this.#refreshTimer);
    clearInterval(this.#watchdog);
    this.#dropSocket();
    const retiring = this.#retiring;
    this.#retiring = undefined;
    retiring?.disconnect();
    retiring?.removeAllListeners();
  }

  // ---- acks ---------------------------------------------------------------------------------------

  #flushAcks(): void {
    clearTimeout(this.#ackTimer);
    this.#ackTimer = undefined;
    if (this.#ackQueue.size === 0) return;
    const ids = [...this.#ackQueue];
    if (this.#role === 'follower') {
      this.#ackQueue.clear();
      for (const id of ids) this.#acked.add(id);
      this.#tabs?.post({ t: 'ack', ids });
      return;
    }
    const socket = this.#socket;
    if (!socket?.connected) return; // sent once live again
    this.#ackQueue.clear();
    for (const id of ids) this.#acked.add(id);
    socket.emit('ack', { ids }, (reply: CommandReply) => {
      if (reply.ok) return;
      for (const id of ids) {
        this.#acked.delete(id);
        this.#ackQueue.add(id);
      }
      this.#ackTimer ??= setTimeout(() => this.#flushAcks(), reply.retryAfterMs ?? 1000);
    });
  }

  // ---- page lifecycle -----------------------------------------------------------------------------

  #listenToPage(): void {
    const page = this.#page;
    if (!page) return;
    const add = (type: string, listener: (event: Event) => void, on: 'page' | 'document' = 'page') => {
      const target = on === 'page' ? page : (page.document as PageTarget | undefined);
      if (typeof target?.addEventListener !== 'function') return;
      target.addEventListener(type, listener);
      this.#pageListeners.push([target, type, listener]);
    };
    const wake = () => {
      this.#checkWatchdog();
      if (this.#role === 'follower') this.#tabs?.check();
      else if (this.#connection !== 'live' && this.#connection !== 'unauthorized') {
        this.#attempt = 0;
        clearTimeout(this.#retryTimer);
        this.#retryTimer = undefined;
        if (!this.#socket) void this.#open();
      }
    };
    add('online', wake);
    add('offline', () => {
      if (!this.#socket?.connected && this.#role !== 'follower') this.#setConnection('offline');
    });
    add(
      'visibilitychange',
      () => {
        if (this.#visible()) {
          this.#tabs?.post({ t: 'focus' });
          wake();
        }
      },
      'document',
    );
    add('focus', () => this.#tabs?.post({ t: 'focus' }));
    // An open WebSocket bars the page from the back/forward cache: close it when the page is hidden
    // that way (or unloaded), and resume from the last offset if it comes back.
    add('pagehide', () => this.#suspend());
    add('pageshow', (event) => {
      if ((event as Event & { persisted?: boolean }).persisted) this.#resume();
    });
  }

  #suspend(): void {
    if (this.#closed || this.#suspended) return;
    this.#flushAcks();
    this.#suspended = true;
    this.#stopSocket();
    this.#tabs?.stop();
    this.#setConnection('offline');
  }

  #resume(): void {
    if (this.#closed || !this.#suspended) return;
    this.#suspended = false;
    this.#attempt = 0;
    this.#setConnection('reconnecting');
    if (this.#tabs) {
      this.#tabs.start();
      this.#follow();
    } else void this.#open();
  }

  #visible(): boolean {
    const state = this.#page?.document?.visibilityState;
    return state === undefined || state === 'visible';
  }

  #offline(): boolean {
    return this.#page?.navigator?.onLine === false;
  }

  /** Which tab shows a toast: the last one that got focus while visible, else the leader (undefined). */
  #toastTab(): string | undefined {
    const focused = this.#page?.document?.hasFocus?.() ?? false;
    if (focused || !this.#tabs) return undefined;
    return this.#focusedTab;
  }

  // ---- state --------------------------------------------------------------------------------------

  #itemOf(offset: InboxOffset): HeraldItem | undefined {
    return this.#store.snapshot().items.find((item) => item.offset === offset);
  }

  #emitNotification(item: HeraldItem, replayed: boolean, toast: boolean): void {
    this.#events.emit('notification', item, { replayed });
    if (toast) this.#events.emit('toast', item);
  }

  #setConnection(connection: ConnectionState, share = true): void {
    if (this.#connection === connection) return;
    // Until the first `live`, a retry is still "connecting".
    const next = connection === 'reconnecting' && this.#lastResume === undefined ? 'connecting' : connection;
    if (this.#connection === next) return;
    this.#connection = next;
    if (share && this.#role === 'leader') this.#tabs?.post({ t: 'conn', connection: next });
    this.#events.emit('connection', next);
    this.#emitState();
  }

  #buildState(): HeraldState {
    return {
      ...this.#store.snapshot(),
      connection: this.#connection,
      role: this.#role,
      lastResume: this.#lastResume,
      error: this.#error,
    };
  }

  #emitState(): void {
    const next = this.#buildState();
    const previous = this.#state;
    if (
      previous.items === next.items &&
      previous.unread === next.unread &&
      previous.lastOffset === next.lastOffset &&
      previous.connection === next.connection &&
      previous.role === next.role &&
      previous.lastResume === next.lastResume &&
      previous.error === next.error
    )
      return;
    this.#state = next;
    for (const listener of this.#listeners) {
      try {
        listener(next);
      } catch (error) {
        this.#log('subscriber threw', { error: String(error) });
      }
    }
  }

  #log(message: string, data?: Record<string, unknown>): void {
    this.#options.log?.(message, { role: this.#role, ...data });
  }
}

interface SharedState {
  items: HeraldItem[];
  unread: UnreadEvent | undefined;
  lastOffset: InboxOffset | undefined;
  connection: ConnectionState;
  lastResume: ResumeInfo | undefined;
  reset: boolean;
}
