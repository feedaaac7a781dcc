import type { GoodbyeEvent, SyncedEvent } from '@herald/protocol';
import { io } from 'socket.io-client';
import { backoffDelay } from './backoff.js';
import type { Core, HeraldSocket } from './core.js';
import { HeraldError, HeraldUnauthorizedError } from './errors.js';
import { loadSnapshot, onResync, onStream, readMarks } from './inbox-sync.js';
import { isOffset } from './offsets.js';
import { refreshDelay, tokenClaims } from './token.js';
import type { HeraldState, ResumeInfo } from './types.js';

// The socket of a leader (or solo) tab: the token, opening and resuming, retries with backoff, the token
// refresh (make before break) and the watchdog.

// The server's refusals of a token: HERALD_ERR_TOKEN_MISSING, _INVALID, _EXPIRED and _REVOKED (a
// pattern rather than a list: 28 B min+gzip less, for a bundle at its budget).
const TOKEN_CODE = /^HERALD_ERR_TOKEN_/;

/** When the token held is due for a refresh (ms from now), by its life since `getToken()` answered it. */
const tokenLeft = (c: Core) =>
  c._token ? refreshDelay(tokenClaims(c._token), Date.now(), c._tokenAt) : undefined;

/** The token held while it is fresh and was not refused, else a new one from `getToken()`. */
export async function getToken(c: Core): Promise<string> {
  if (c._token && !c._tokenRefused && (tokenLeft(c) ?? 1) > 0) return c._token;
  const token = await c._options.getToken();
  if (typeof token !== 'string' || token.length === 0)
    throw new HeraldError('HERALD_ERR_TOKEN_MISSING', 'getToken() returned no token.');
  c._token = token;
  c._tokenAt = Date.now();
  c._tokenRefused = false;
  return token;
}

export function tokenFailed(c: Core, error: unknown): void {
  if (error instanceof HeraldUnauthorizedError) {
    c._error = { code: error.code, message: error.message };
    stopSocket(c);
    c._setConnection('unauthorized');
    return;
  }
  tokenUnavailable(c, error);
  scheduleRetry(c);
  c._emitState();
}

/** `getToken()` failed, not for a signed-out user: said on `error` and in the state; the caller retries. */
export function tokenUnavailable(c: Core, error: unknown): void {
  c._error = {
    code: 'HERALD_ERR_TOKEN_UNAVAILABLE',
    message: String((error as Error)?.message ?? error),
  };
  c._events.emit('error', error);
  c._emitState();
}

/** Opens a socket that resumes from the last offset seen; `replacing` stays until the new one is synced. */
export async function open(c: Core, replacing?: HeraldSocket): Promise<void> {
  if (c._closed || c._suspended || c._opening || c._role === 'follower') return;
  if (c._socket && !replacing) return;
  c._opening = true;
  clearTimeout(c._retryTimer);
  c._retryTimer = undefined;
  let token: string;
  try {
    token = await getToken(c);
  } catch (error) {
    c._opening = false;
    tokenFailed(c, error);
    return;
  }
  c._opening = false;
  // The role may have changed while the token was fetched (this tab stepped down).
  if (c._closed || c._suspended || (c._role as HeraldState['role']) === 'follower') return;
  if (c._socket && !replacing) return;
  const lastOffset = c._store.lastOffset;
  const url = typeof c._options.url === 'string' ? c._options.url : c._options.url();
  c._log('connecting', { url, lastOffset });
  const socket: HeraldSocket = io(url, {
    auth: { token, ...(lastOffset !== undefined ? { lastOffset } : {}) },
    transports: ['websocket'],
    reconnection: false,
    forceNew: true,
    timeout: c._timeoutMs,
  });
  if (replacing) c._retiring = replacing;
  c._socket = socket;
  let goodbye: GoodbyeEvent | undefined;
  const mine = () => socket === c._socket || socket === c._retiring;

  socket.io.engine?.on('handshake', (data: { pingInterval?: number; pingTimeout?: number }) => {
    c._silenceLimitMs =
      (data.pingInterval ?? 25_000) + (data.pingTimeout ?? 20_000) + (c._options.watchdogSlackMs ?? 2000);
    c._lastServerPing = Date.now();
  });
  socket.io.on('ping', () => {
    if (socket !== c._socket) return;
    c._lastServerPing = Date.now();
    c._tabs?.beat();
  });
  socket.on('notification', (event) => {
    // One with no offset cannot be placed (a stand-in, a server of another version): dropped, not
    // thrown in Socket.IO's handler (an uncaught TypeError, which ends a Node process).
    if (mine() && isOffset(event?.offset)) onStream(c, event);
  });
  socket.on('unread', (unread) => {
    // Not of Herald's shape: dropped, not thrown in Socket.IO's handler (as a notification's).
    if (!mine() || !unread) return;
    // A read on another device (or over REST): its ids, so that the list follows as well as the count.
    readMarks(c, unread.read, unread);
    c._tabs?.post({ t: 'unread', unread });
  });
  // Each field not of Herald's shape is left out (the store checks offsets and counts): the server
  // still said that its replay is done, or that the offset is gone.
  socket.on('synced', (synced) => {
    if (socket === c._socket) onSynced(c, synced ?? {}, lastOffset !== undefined, socket);
  });
  socket.on('resync', (resync) => {
    if (socket === c._socket) onResync(c, resync ?? {}, socket);
  });
  socket.on('goodbye', (event) => {
    goodbye = event;
  });
  socket.on('connect_error', (error: Error & { data?: { code?: string; retryAfterMs?: number } }) => {
    if (socket !== c._socket) return;
    const code = error.data?.code ?? 'HERALD_ERR_CONNECT';
    c._error = { code, message: error.message };
    c._log('connect_error', c._error);
    if (TOKEN_CODE.test(code)) c._tokenRefused = true;
    socketLost(c, socket, error.data?.retryAfterMs);
  });
  socket.on('disconnect', (reason) => {
    c._log('disconnect', { reason, goodbye: goodbye?.code });
    if (goodbye && !goodbye.reconnect) c._tokenRefused = true;
    if (goodbye) c._error = { code: goodbye.code, message: goodbye.message };
    if (socket === c._retiring) {
      c._retiring = undefined;
      return;
    }
    if (socket !== c._socket) return;
    // A planned shutdown: another instance takes us at once (the first retry is still jittered).
    if (goodbye?.code === 'HERALD_SERVER_SHUTDOWN') c._attempt = 0;
    socketLost(c, socket);
  });
  clearInterval(c._watchdog);
  c._watchdog = setInterval(() => checkWatchdog(c), 1000);
}

/** The replay is done: live once the inbox is loaded (first connection, resync). */
function onSynced(c: Core, synced: Partial<SyncedEvent>, wasRecovering: boolean, socket: HeraldSocket): void {
  c._attempt = 0;
  c._error = undefined;
  c._store.advanceTo(synced.lastOffset);
  c._store.setUnread(synced.unread);
  // Replayed notifications carry no count: after a replay alone, this is the count the other tabs
  // would never hear (they keep the highest version, so sending it again is harmless).
  c._tabs?.post({ t: 'unread', unread: synced.unread });
  dropRetiring(c);
  const finish = () => {
    const resynced = c._lastResume?.resynced === true && c._resyncedOn === socket;
    const info: ResumeInfo = {
      recovered: wasRecovering && !resynced,
      wasRecovering,
      replayed: Number(synced.replayed) || 0,
      resynced,
    };
    c._lastResume = info;
    c._setConnection('live', false);
    c._tabs?.post({ t: 'conn', connection: 'live', resume: info, lastResume: info });
    c._events.emit('resume', info);
    c._emitState();
    scheduleRefresh(c);
    c._acks.flush();
  };
  if (c._needSnapshot && !c._resyncPending) {
    // First connection of this client: the history comes from a listing (with read marks), up to the
    // offset the stream starts after; what follows arrives on the stream.
    void loadSnapshot(c, socket, synced.lastOffset).then(finish);
  } else if (c._resyncPending) {
    void c._resyncPending.then(finish);
  } else finish();
}

function socketLost(c: Core, socket: HeraldSocket, retryAfterMs?: number): void {
  if (socket === c._socket) dropSocket(c);
  // A refresh in progress whose new socket failed: the old one is still live.
  if (c._retiring?.connected) {
    c._socket = c._retiring;
    c._retiring = undefined;
    scheduleRefresh(c, 5000);
    return;
  }
  if (c._closed || c._suspended || c._role === 'follower') return;
  c._setConnection(c._offline() ? 'offline' : 'reconnecting');
  scheduleRetry(c, retryAfterMs);
  // Why (`error`), also while the connection stays what it was: a retry before the first `live` is
  // still `connecting`, and `getState()` is rebuilt only on a change that is told.
  c._emitState();
}

function scheduleRetry(c: Core, atLeastMs = 0): void {
  if (c._closed || c._suspended || c._retryTimer || c._connection === 'unauthorized') return;
  if (c._offline()) {
    c._setConnection('offline');
    return; // `online` retries
  }
  const delay = Math.max(atLeastMs, backoffDelay(c._attempt++, c._options.backoff));
  c._log('retry', { delay, attempt: c._attempt });
  c._retryTimer = setTimeout(() => {
    c._retryTimer = undefined;
    void open(c);
  }, delay);
}

function scheduleRefresh(c: Core, overrideMs?: number): void {
  clearTimeout(c._refreshTimer);
  const delay = overrideMs ?? tokenLeft(c);
  if (delay === undefined) return;
  c._refreshTimer = setTimeout(() => {
    const current = c._socket;
    if (!current?.connected || c._closed) return;
    c._log('refreshing token');
    c._tokenRefused = true; // fetch a new one
    void open(c, current);
  }, delay);
}

/** Kills a socket that stopped receiving server pings (a zombie after sleep, a dead path). */
export function checkWatchdog(c: Core): void {
  const socket = c._socket;
  if (!socket?.connected || c._silenceLimitMs === 0) return;
  if (Date.now() - c._lastServerPing <= c._silenceLimitMs) return;
  c._log('no server ping', { silentMs: Date.now() - c._lastServerPing });
  c._error = { code: 'HERALD_ERR_PING_TIMEOUT', message: 'The server stopped answering: reconnecting.' };
  socketLost(c, socket);
}

export function dropSocket(c: Core): void {
  const socket = c._socket;
  c._socket = undefined;
  if (socket) {
    socket.disconnect();
    socket.removeAllListeners();
    socket.io.removeAllListeners();
  }
}

/** Closes the socket a token refresh replaced. */
function dropRetiring(c: Core): void {
  const retiring = c._retiring;
  c._retiring = undefined;
  retiring?.disconnect();
  retiring?.removeAllListeners();
}

/** Closes the socket (and the one a refresh replaces) and stops every timer. */
export function stopSocket(c: Core): void {
  clearTimeout(c._retryTimer);
  c._retryTimer = undefined;
  clearTimeout(c._refreshTimer);
  clearInterval(c._watchdog);
  dropSocket(c);
  dropRetiring(c);
}
