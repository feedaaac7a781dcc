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
import { type HeraldItem, InboxStore } from './store.js';
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
 * `tab-sharing.ts`, `page.ts`) read and write: one object, the parts being functions of it. Plain
 * properties rather than `#private` ones because several modules share them; it stays internal (the
 * client's public object holds it privately).
 */
export class Core {
  readonly options: HeraldClientOptions;
  readonly store: InboxStore;
  readonly events: Emitter<HeraldEvents>;
  readonly listeners = new Set<(state: HeraldState) => void>();
  readonly page: PageLike | undefined;
  readonly acks: AckQueue;
  readonly requests: TabRequests;
  state: HeraldState;
  connection: ConnectionState = 'connecting';
  role: HeraldState['role'] = 'solo';
  lastResume: ResumeInfo | undefined;
  error: HeraldState['error'];
  closed = false;
  suspended = false;

  // The socket (leader or solo): connection.ts
  socket: HeraldSocket | undefined;
  /** The socket being replaced by `socket` (token refresh: make before break). */
  retiring: HeraldSocket | undefined;
  opening = false;
  attempt = 0;
  retryTimer: ReturnType<typeof setTimeout> | undefined;
  refreshTimer: ReturnType<typeof setTimeout> | undefined;
  watchdog: ReturnType<typeof setInterval> | undefined;
  lastServerPing = 0;
  silenceLimitMs = 0;
  token: string | undefined;
  tokenRefused = false;

  // The inbox: inbox-sync.ts
  needSnapshot = true;
  snapshotLoading: Promise<void> | undefined;
  fillLoading = false;
  resyncedOn: HeraldSocket | undefined;
  resyncPending: Promise<void> | undefined;

  // Tabs: tab-sharing.ts
  tabs: TabElection | undefined;
  focusedTab: string | undefined;
  readonly locks: LockManagerLike | undefined;
  readonly makeChannel: ((name: string) => ChannelLike) | undefined;

  constructor(options: HeraldClientOptions) {
    this.options = options;
    this.store = new InboxStore({ maxItems: options.maxItems ?? 200 });
    if (options.lastOffset) this.store.advanceTo(options.lastOffset);
    this.events = new Emitter((error) => this.log('listener threw', { error: String(error) }));
    const page = options.page === undefined ? (globalThis as unknown as PageLike) : options.page;
    this.page = page && typeof page.addEventListener === 'function' ? page : undefined;
    this.locks =
      options.tabs === false
        ? undefined
        : options.locks === undefined
          ? (globalThis as { navigator?: { locks?: LockManagerLike } }).navigator?.locks
          : (options.locks ?? undefined);
    this.makeChannel =
      options.channel ??
      (typeof BroadcastChannel === 'function'
        ? (name: string) => new BroadcastChannel(name) as unknown as ChannelLike
        : undefined);
    // Without Web Locks (insecure context, Node 20) this tab keeps its own socket and rebroadcasts nothing.
    this.role = this.locks && this.makeChannel ? 'follower' : 'solo';
    this.acks = new AckQueue(
      (ids, failed) => {
        if (this.role === 'follower') {
          this.tabs?.post({ t: 'ack', ids });
          return true;
        }
        const socket = this.socket;
        if (!socket?.connected) return false; // sent once live again
        socket.emit('ack', { ids }, (reply: CommandReply) => {
          if (!reply.ok) failed(reply.retryAfterMs);
        });
        return true;
      },
      options.ackDelayMs ?? 250,
      options.ackBatch ?? 20,
    );
    this.requests = new TabRequests(() => this.tabs, options.timeoutMs ?? 10_000);
    this.state = this.#build();
  }

  /** How long a command waits for the server (ms). */
  get timeoutMs(): number {
    return this.options.timeoutMs ?? 10_000;
  }

  visible(): boolean {
    const state = this.page?.document?.visibilityState;
    return state === undefined || state === 'visible';
  }

  offline(): boolean {
    return this.page?.navigator?.onLine === false;
  }

  itemOf(offset: InboxOffset): HeraldItem | undefined {
    return this.store.snapshot().items.find((item) => item.offset === offset);
  }

  emitNotification(item: HeraldItem, replayed: boolean, toast: boolean): void {
    this.events.emit('notification', item, { replayed });
    if (toast) this.events.emit('toast', item);
  }

  setConnection(connection: ConnectionState, share = true): void {
    if (this.connection === connection) return;
    // Until the first `live`, a retry is still "connecting".
    const next = connection === 'reconnecting' && this.lastResume === undefined ? 'connecting' : connection;
    if (this.connection === next) return;
    this.connection = next;
    if (share && this.role === 'leader') this.tabs?.post({ t: 'conn', connection: next });
    this.events.emit('connection', next);
    this.emitState();
  }

  /** Calls the subscribers if anything they see changed. */
  emitState(): void {
    const next = this.#build();
    const previous = this.state;
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
    this.state = next;
    for (const listener of this.listeners) {
      try {
        listener(next);
      } catch (error) {
        this.log('subscriber threw', { error: String(error) });
      }
    }
  }

  /** What a leader sends a follower: the whole inbox held and the connection (`reset`: drop yours first). */
  shareableState(reset = false): SharedState {
    const snapshot = this.store.snapshot();
    return {
      items: [...snapshot.items],
      unread: snapshot.unread,
      lastOffset: snapshot.lastOffset,
      connection: this.connection,
      lastResume: this.lastResume,
      reset,
    };
  }

  log(message: string, data?: Record<string, unknown>): void {
    this.options.log?.(message, { role: this.role, ...data });
  }

  #build(): HeraldState {
    return {
      ...this.store.snapshot(),
      connection: this.connection,
      role: this.role,
      lastResume: this.lastResume,
      error: this.error,
    };
  }
}
