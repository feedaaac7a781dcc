import type { InboxListPage, InboxOffset, UnreadEvent } from '@herald/protocol';
import { run } from './commands.js';
import { dropSocket, open, stopSocket } from './connection.js';
import { Core } from './core.js';
import { resync } from './inbox-sync.js';
import { listenToPage } from './page.js';
import {
  type PushRegistration,
  type PushRegistrationLike,
  pushPublicKey,
  registerPush,
  unregisterPush,
} from './push.js';
import { start } from './tab-sharing.js';
import type {
  HeraldClient,
  HeraldClientOptions,
  HeraldEvents,
  HeraldPreferences,
  HeraldState,
  MuteTarget,
  TopicSubscription,
} from './types.js';

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

/** The public face of one client: its state lives in a {@link Core} that the other modules work on. */
class Client implements HeraldClient {
  readonly #c: Core;
  readonly #stopListening: () => void;

  constructor(options: HeraldClientOptions) {
    const c = new Core(options);
    this.#c = c;
    this.#stopListening = listenToPage(c);
    void start(c);
  }

  subscribe(listener: (state: HeraldState) => void): () => void {
    const listeners = this.#c._listeners;
    listeners.add(listener);
    return () => listeners.delete(listener);
  }

  getState(): HeraldState {
    return this.#c._state;
  }

  on<Name extends keyof HeraldEvents>(
    name: Name,
    listener: (...args: HeraldEvents[Name]) => void,
  ): () => void {
    return this.#c._events.on(name, listener);
  }

  list(
    options: { after?: InboxOffset; before?: InboxOffset; newest?: boolean; limit?: number } = {},
  ): Promise<InboxListPage> {
    return run(this.#c, 'list', options) as Promise<InboxListPage>;
  }

  markRead(ids: readonly string[]): Promise<{ changed: number; unread?: UnreadEvent }> {
    return run(this.#c, 'read', { ids: [...ids] }) as Promise<{ changed: number; unread?: UnreadEvent }>;
  }

  markAllRead(upTo = this.#c._store.lastOffset): Promise<{ changed: number; unread?: UnreadEvent }> {
    // Up to the last offset this client has: not one stored meanwhile that the user has not seen yet.
    // (An undefined upTo is left out on the wire: Socket.IO sends JSON.)
    return run(this.#c, 'read-all', { upTo }) as Promise<{
      changed: number;
      unread?: UnreadEvent;
    }>;
  }

  shown(ids: readonly string[]): void {
    this.#c._acks.add(ids);
  }

  registerPush(options: {
    registration: PushRegistrationLike;
    vapidPublicKey?: string;
  }): Promise<PushRegistration> {
    return registerPush(this.#c, options);
  }

  unregisterPush(options: { registration: PushRegistrationLike }): Promise<boolean> {
    return unregisterPush(this.#c, options);
  }

  pushPublicKey(): Promise<string> {
    return pushPublicKey(this.#c);
  }

  resync(): Promise<void> {
    return resync(this.#c);
  }

  async preferences(): Promise<HeraldPreferences> {
    return ((await run(this.#c, 'preferences', {})) as { preferences: HeraldPreferences }).preferences;
  }

  mute(target: MuteTarget): Promise<HeraldPreferences> {
    return this.#mutes('mute', target);
  }

  unmute(target: MuteTarget): Promise<HeraldPreferences> {
    return this.#mutes('unmute', target);
  }

  topics(): Promise<TopicSubscription[]> {
    return this.#topics('topics', {});
  }

  subscribeTopic(topic: string): Promise<TopicSubscription[]> {
    return this.#topics('subscribe', { topic });
  }

  unsubscribeTopic(topic: string): Promise<TopicSubscription[]> {
    return this.#topics('unsubscribe', { topic });
  }

  async #topics(op: string, body: unknown): Promise<TopicSubscription[]> {
    return ((await run(this.#c, op, body)) as { topics: TopicSubscription[] }).topics;
  }

  async #mutes(op: 'mute' | 'unmute', target: MuteTarget): Promise<HeraldPreferences> {
    const body = 'topic' in target ? { topics: [target.topic] } : { types: [target.type] };
    return ((await run(this.#c, op, body)) as { preferences: HeraldPreferences }).preferences;
  }

  reconnect(): void {
    const c = this.#c;
    if (c._closed) return;
    if (c._connection === 'unauthorized') {
      c._token = undefined;
      c._setConnection(c._lastResume ? 'reconnecting' : 'connecting');
    }
    c._attempt = 0;
    if (c._role !== 'solo' && !c._tabs) {
      void start(c);
      return;
    }
    if (c._role === 'follower') {
      c._tabs?.check();
      return;
    }
    if (c._socket?.connected && c._connection === 'live') return;
    dropSocket(c);
    void open(c);
  }

  close(): void {
    const c = this.#c;
    if (c._closed) return;
    c._acks.flush();
    c._closed = true;
    stopSocket(c);
    c._tabs?.close();
    c._tabs = undefined;
    this.#stopListening();
    c._requests.close();
    c._setConnection('offline');
    c._events.clear();
    c._listeners.clear();
  }
}
