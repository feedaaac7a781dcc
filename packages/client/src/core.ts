import type {
  ClientToServerEvents,
  CommandReply,
  InboxOffset,
  ServerToClientEvents,
  UnreadEvent,
} from '@herald/protocol';
import type { Socket } from 'socket.io-client';
import { AckQueue } from './acks.js';
import { Emitter } from './emitter.js';
import { HeraldError } from './errors.js';
import { type HeraldItem, type InboxSnapshot, InboxStore } from './store.js';
import { TabRequests } from './tab-requests.js';
import type { ChannelLike, LockManagerLike, TabElection } from './tabs.js';
import type {
  ConnectionState,
  HeraldClientOptions,
  HeraldEvents,
  HeraldState,
  PageLike,
  ResumeInfo,
} from './types.js';

export type HeraldSocket = Socket<ServerToClientEvents, ClientToServerEvents>;

/** What a leader tab shares with its followers (`state` message). */
export interface SharedState {
  items: HeraldItem[];
  unread: UnreadEvent | undefined;
  lastOffset: InboxOffset | undefined;
  connection: ConnectionState;
  lastResume: ResumeInfo | undefined;
  reset: boolean;
}

/**
 * The state of one client, which its parts (`connection.ts`, `inbox-sync.ts`, `commands.ts`,
 * `tab-sharing.ts`, `page.ts`) read and write: one object, the parts being functions of it. Its members
 * are shared by several modules, so they cannot be `#private`; they start with `_` instead, which the
 * build shortens (`scripts/build.mjs`) as a bundler shortens `#private` names. It stays internal: the
 * client's public object holds it in a `#private` field.
 */
export class Core {
  readonly _options: HeraldClientOptions;
  readonly _store: InboxStore;
  readonly _events: Emitter<HeraldEvents>;
  readonly _listeners = new Set<(state: HeraldState) => void>();
  readonly _page: PageLike | undefined;
  readonly _acks: AckQueue;
  readonly _requests: TabRequests;
  _state: HeraldState;
  _connection: ConnectionState = 'connecting';
  _role: HeraldState['role'] = 'solo';
  _lastResume: ResumeInfo | undefined;
  _error: HeraldState['error'];
  _closed = false;
  _suspended = false;

  // The socket (leader or solo): connection.ts
  _socket: HeraldSocket | undefined;
  /** The socket being replaced by `_socket` (token refresh: make before break). */
  _retiring: HeraldSocket | undefined;
  _opening = false;
  _attempt = 0;
  _retryTimer: ReturnType<typeof setTimeout> | undefined;
  _refreshTimer: ReturnType<typeof setTimeout> | undefined;
  _watchdog: ReturnType<typeof setInterval> | undefined;
  _lastServerPing = 0;
  _silenceLimitMs = 0;
  _token: string | undefined;
  /** When `getToken()` answered `_token` (this clock): its life counts from then. */
  _tokenAt = 0;
  _tokenRefused = false;

  // The inbox: inbox-sync.ts
  _needSnapshot = true;
  _snapshotLoading: Promise<void> | undefined;
  _fillLoading = false;
  _resyncedOn: HeraldSocket | undefined;
  _resyncPending: Promise<void> | undefined;

  // Tabs: tab-sharing.ts
  _tabs: TabElection | undefined;
  _focusedTab: string | undefined;
  readonly _locks: LockManagerLike | undefined;
  readonly _makeChannel: ((name: string) => ChannelLike) | undefined;

  constructor(options: HeraldClientOptions) {
    this._options = options;
    const maxItems = options.maxItems ?? 200;
    // The first load lists the newest maxItems: anything else would fail there, on every connection.
    if (!(maxItems > 0 && maxItems % 1 === 0))
      throw new HeraldError('HERALD_ERR_VALIDATION', `maxItems must be an integer >= 1, not ${maxItems}`);
    this._store = new InboxStore({ maxItems });
    // A saved offset that is none (corrupted storage) would be refused on every handshake, for good:
    // left out (`advanceTo` takes offsets only), the first connection loads the inbox all the same.
    this._store.advanceTo(options.lastOffset);
    this._events = new Emitter((error) => this._log('listener threw', { error: String(error) }));
    const page = options.page === undefined ? (globalThis as unknown as PageLike) : options.page;
    this._page = page && typeof page.addEventListener === 'function' ? page : undefined;
    this._locks =
      options.tabs === false
        ? undefined
        : options.locks === undefined
          ? (globalThis as { navigator?: { locks?: LockManagerLike } }).navigator?.locks
          : (options.locks ?? undefined);
    this._makeChannel =
      options.channel ??
      (typeof BroadcastChannel === 'function'
        ? (name: string) => new BroadcastChannel(name) as unknown as ChannelLike
        : undefined);
    // Without Web Locks (insecure context, Node 20) this tab keeps its own socket and rebroadcasts nothing.
    this._role = this._locks && this._makeChannel ? 'follower' : 'solo';
    this._acks = new AckQueue(
      (ids, failed) => {
        if (this._role === 'follower') {
          // A request like any command: waits for a leader, is sent again to a new one, and runs here
          // if this tab leads first (a fire-and-forget post was lost with a leader frozen or closing).
          this._requests.send('ack', { ids }).catch(() => failed());
          return true;
        }
        const socket = this._socket;
        if (!socket?.connected) return false; // sent once live again
        socket.emit('ack', { ids }, (reply: CommandReply) => {
          if (!reply.ok) failed(reply.retryAfterMs);
        });
        return true;
      },
      options.ackDelayMs ?? 250,
      options.ackBatch ?? 20,
    );
    this._requests = new TabRequests(() => this._tabs, this._timeoutMs);
    this._state = this.#build();
  }

  /** How long a command waits for the server (ms). */
  get _timeoutMs(): number {
    return this._options.timeoutMs ?? 10_000;
  }

  _visible(): boolean {
    const state = this._page?.document?.visibilityState;
    return state === undefined || state === 'visible';
  }

  _offline(): boolean {
    return this._page?.navigator?.onLine === false;
  }

  _itemOf(offset: InboxOffset): HeraldItem | undefined {
    return this._store.snapshot().items.find((item) => item.offset === offset);
  }

  _emitNotification(item: HeraldItem, replayed: boolean, toast?: boolean): void {
    this._events.emit('notification', item, { replayed });
    if (toast) this._events.emit('toast', item);
  }

  _setConnection(connection: ConnectionState, share = true): void {
    if (this._connection === connection) return;
    // Until the first `live`, a retry is still "connecting".
    const next = connection === 'reconnecting' && this._lastResume === undefined ? 'connecting' : connection;
    if (this._connection === next) return;
    this._connection = next;
    if (share && this._role === 'leader') this._tabs?.post({ t: 'conn', connection: next });
    this._events.emit('connection', next);
    this._emitState();
  }

  /** Calls the subscribers if anything they see changed. */
  _emitState(): void {
    const next = this.#build();
    const previous = this._state as unknown as Record<string, unknown>;
    // Every member is an immutable value or object: a shallow comparison tells.
    if (Object.entries(next).every(([key, value]) => previous[key] === value)) return;
    this._state = next;
    for (const listener of this._listeners) {
      try {
        listener(next);
      } catch (error) {
        this._log('subscriber threw', { error: String(error) });
      }
    }
  }

  /** What a leader sends a follower: the whole inbox held and the connection (`reset`: drop yours first). */
  _shareableState(reset = false): SharedState {
    // The snapshot's items are never changed in place (a change makes a new snapshot): shared as they are.
    return {
      ...(this._store.snapshot() as InboxSnapshot & { items: HeraldItem[] }),
      connection: this._connection,
      lastResume: this._lastResume,
      reset,
    };
  }

  _log(message: string, data?: Record<string, unknown>): void {
    this._options.log?.(message, { role: this._role, ...data });
  }

  #build(): HeraldState {
    return {
      ...this._store.snapshot(),
      connection: this._connection,
      role: this._role,
      lastResume: this._lastResume,
      error: this._error,
    };
  }
}
