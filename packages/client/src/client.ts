import type { InboxListPage, InboxOffset, UnreadEvent } from '@herald/protocol';
import { run } from './commands.js';
import { dropSocket, open, stopSocket } from './connection.js';
import { Core } from './core.js';
import { resync } from './inbox-sync.js';
import { listenToPage } from './page.js';
import { start } from './tab-sharing.js';
import type { HeraldClient, HeraldClientOptions, HeraldEvents, HeraldState } from './types.js';

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
    const listeners = this.#c.listeners;
    listeners.add(listener);
    return () => listeners.delete(listener);
  }

  getState(): HeraldState {
    return this.#c.state;
  }

  on<Name extends keyof HeraldEvents>(
    name: Name,
    listener: (...args: HeraldEvents[Name]) => void,
  ): () => void {
    return this.#c.events.on(name, listener);
  }

  list(options: { after?: InboxOffset; limit?: number } = {}): Promise<InboxListPage> {
    return run(this.#c, 'list', options) as Promise<InboxListPage>;
  }

  markRead(ids: readonly string[]): Promise<{ changed: number; unread?: UnreadEvent }> {
    return run(this.#c, 'read', { ids: [...ids] }) as Promise<{ changed: number; unread?: UnreadEvent }>;
  }

  markAllRead(upTo?: InboxOffset): Promise<{ changed: number; unread?: UnreadEvent }> {
    return run(this.#c, 'read-all', upTo === undefined ? {} : { upTo }) as Promise<{
      changed: number;
      unread?: UnreadEvent;
    }>;
  }

  shown(ids: readonly string[]): void {
    this.#c.acks.add(ids);
  }

  resync(): Promise<void> {
    return resync(this.#c);
  }

  reconnect(): void {
    const c = this.#c;
    if (c.closed) return;
    if (c.connection === 'unauthorized') {
      c.token = undefined;
      c.setConnection(c.lastResume ? 'reconnecting' : 'connecting');
    }
    c.attempt = 0;
    if (c.role !== 'solo' && !c.tabs) {
      void start(c);
      return;
    }
    if (c.role === 'follower') {
      c.tabs?.check();
      return;
    }
    if (c.socket?.connected && c.connection === 'live') return;
    dropSocket(c);
    void open(c);
  }

  close(): void {
    const c = this.#c;
    if (c.closed) return;
    c.acks.flush();
    c.closed = true;
    stopSocket(c);
    c.tabs?.close();
    c.tabs = undefined;
    this.#stopListening();
    c.requests.close();
    c.setConnection('offline');
    c.events.clear();
    c.listeners.clear();
  }
}
