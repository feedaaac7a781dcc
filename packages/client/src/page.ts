import { checkWatchdog, open, stopSocket } from './connection.js';
import type { Core } from './core.js';
import { follow } from './tab-sharing.js';
import type { PageTarget } from './types.js';

// The page's lifecycle drives the connection: `online`, a page shown again, the back/forward cache.

/** Listens to the page (if any); answers the function that stops listening. */
export function listenToPage(c: Core): () => void {
  const page = c._page;
  const added: [PageTarget, string, (event: Event) => void][] = [];
  const remove = () => {
    for (const [target, type, listener] of added) target.removeEventListener(type, listener);
  };
  if (!page) return remove;
  const add = (type: string, listener: (event: Event) => void, on: 'page' | 'document' = 'page') => {
    const target = on === 'page' ? page : (page.document as PageTarget | undefined);
    if (typeof target?.addEventListener !== 'function') return;
    target.addEventListener(type, listener);
    added.push([target, type, listener]);
  };
  const wake = () => {
    checkWatchdog(c);
    if (c._role === 'follower') c._tabs?.check();
    else if (c._connection !== 'live' && c._connection !== 'unauthorized') {
      c._attempt = 0;
      clearTimeout(c._retryTimer);
      c._retryTimer = undefined;
      if (!c._socket) void open(c);
    }
  };
  add('online', wake);
  add('offline', () => {
    if (!c._socket?.connected && c._role !== 'follower') c._setConnection('offline');
  });
  add(
    'visibilitychange',
    () => {
      if (c._visible()) {
        c._tabs?.post({ t: 'focus' });
        wake();
      }
    },
    'document',
  );
  add('focus', () => c._tabs?.post({ t: 'focus' }));
  // An open WebSocket bars the page from the back/forward cache: close it when the page is hidden
  // that way (or unloaded), and resume from the last offset if it comes back.
  add('pagehide', () => suspend(c));
  add('pageshow', (event) => {
    if ((event as Event & { persisted?: boolean }).persisted) resume(c);
  });
  return remove;
}

function suspend(c: Core): void {
  if (c._closed || c._suspended) return;
  c._acks.flush();
  c._suspended = true;
  stopSocket(c);
  c._tabs?.stop();
  c._setConnection('offline');
}

function resume(c: Core): void {
  if (c._closed || !c._suspended) return;
  c._suspended = false;
  c._attempt = 0;
  c._setConnection('reconnecting');
  if (c._tabs) {
    c._tabs.start();
    follow(c);
  } else void open(c);
}
