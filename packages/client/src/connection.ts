import type { GoodbyeEvent, SyncedEvent } from '@herald/protocol';
import { io } from 'socket.io-client';
import { backoffDelay } from './backoff.js';
import type { Core, HeraldSocket } from './core.js';
import { HeraldError, HeraldUnauthorizedError } from './errors.js';
import { loadSnapshot, onResync, onStream } from './inbox-sync.js';
import { refreshDelay, tokenClaims } from './token.js';
import type { HeraldState, ResumeInfo } from './types.js';

// The socket of a leader (or solo) tab: the token, opening and resuming, retries with backoff, the token
// refresh (make before break) and the watchdog.

const TOKEN_CODES = new Set([
  'HERALD_ERR_TOKEN_MISSING',
  'HERALD_ERR_TOKEN_INVALID',
  'HERALD_ERR_TOKEN_EXPIRED',
  'HERALD_ERR_TOKEN_REVOKED',
]);

/** The token held while it is fresh and was not refused, else a new one from `getToken()`. */
export async function getToken(c: Core): Promise<string> {
  const claims = c.token ? tokenClaims(c.token) : undefined;
  const fresh = claims && !c.tokenRefused && (refreshDelay(claims) ?? 1) > 0;
  if (c.token && fresh) return c.token;
  const token = await c.options.getToken();
  if (typeof token !== 'string' || token.length === 0)
    throw new HeraldError('HERALD_ERR_TOKEN_MISSING', 'getToken() returned no token.');
  c.token = token;
  c.tokenRefused = false;
  return token;
}

export function tokenFailed(c: Core, error: unknown): void {
  if (error instanceof HeraldUnauthorizedError) {
    c.error = { code: error.code, message: error.message };
    stopSocket(c);
    c.setConnection('unauthorized');
    return;
  }
  c.error = {
    code: 'HERALD_ERR_TOKEN_UNAVAILABLE',
    message: String((error as Error)?.message ?? error),
  };
  c.events.emit('error', error);
  scheduleRetry(c);
}

/** Opens a socket that resumes from the last offset seen; `replacing` stays until the new one is synced. */
export async function open(c: Core, replacing?: HeraldSocket): Promise<void> {
  if (c.closed || c.suspended || c.opening || c.role === 'follower') return;
  if (c.socket && !replacing) return;
  c.opening = true;
  clearTimeout(c.retryTimer);
  c.retryTimer = undefined;
  let token: string;
  try {
    token = await getToken(c);
  } catch (error) {
    c.opening = false;
    tokenFailed(c, error);
    return;
  }
  c.opening = false;
  // The role may have changed while the token was fetched (this tab stepped down).
  if (c.closed || c.suspended || (c.role as HeraldState['role']) === 'follower') return;
  if (c.socket && !replacing) return;
  const lastOffset = c.store.lastOffset;
  const url = typeof c.options.url === 'string' ? c.options.url : c.options.url();
  c.log('connecting', { url, lastOffset });
  const socket: HeraldSocket = io(url, {
    auth: { token, ...(lastOffset !== undefined ? { lastOffset } : {}) },
    transports: ['websocket'],
    reconnection: false,
    forceNew: true,
    timeout: c.timeoutMs,
  });
  if (replacing) c.retiring = replacing;
  c.socket = socket;
  let goodbye: GoodbyeEvent | undefined;
  const mine = () => socket === c.socket || socket === c.retiring;

  socket.io.engine?.on('handshake', (data: { pingInterval?: number; pingTimeout?: number }) => {
    c.silenceLimitMs =
      (data.pingInterval ?? 25_000) + (data.pingTimeout ?? 20_000) + (c.options.watchdogSlackMs ?? 2000);
    c.lastServerPing = Date.now();
  });
  socket.io.on('ping', () => {
    if (socket !== c.socket) return;
    c.lastServerPing = Date.now();
    c.tabs?.beat();
  });
  socket.on('notification', (event) => {
    if (mine()) onStream(c, event);
  });
  socket.on('unread', (unread) => {
    if (!mine()) return;
    if (c.store.setUnread(unread)) c.emitState();
    c.tabs?.post({ t: 'unread', unread });
  });
  socket.on('synced', (synced) => {
    if (socket === c.socket) onSynced(c, synced, lastOffset !== undefined, socket);
  });
  socket.on('resync', (resync) => {
    if (socket === c.socket) onResync(c, resync, socket);
  });
  socket.on('goodbye', (event) => {
    goodbye = event;
  });
  socket.on('connect_error', (error: Error & { data?: { code?: string; retryAfterMs?: number } }) => {
    if (socket !== c.socket) return;
    const code = error.data?.code ?? 'HERALD_ERR_CONNECT';
    c.log('connect_error', { code, message: error.message });
    c.error = { code, message: error.message };
    if (TOKEN_CODES.has(code)) c.tokenRefused = true;
    socketLost(c, socket, error.data?.retryAfterMs);
  });
  socket.on('disconnect', (reason) => {
    c.log('disconnect', { reason, goodbye: goodbye?.code });
    if (goodbye && !goodbye.reconnect) c.tokenRefused = true;
    if (goodbye) c.error = { code: goodbye.code, message: goodbye.message };
    if (socket === c.retiring) {
      c.retiring = undefined;
      return;
    }
    if (socket !== c.socket) return;
    // A planned shutdown: another instance takes us at once (the first retry is still jittered).
    if (goodbye?.code === 'HERALD_SERVER_SHUTDOWN') c.attempt = 0;
    socketLost(c, socket);
  });
  clearInterval(c.watchdog);
  c.watchdog = setInterval(() => checkWatchdog(c), 1000);
}

/** The replay is done: live once the inbox is loaded (first connection, resync). */
function onSynced(c: Core, synced: SyncedEvent, wasRecovering: boolean, socket: HeraldSocket): void {
  c.attempt = 0;
  c.error = undefined;
  c.store.advanceTo(synced.lastOffset);
  c.store.setUnread(synced.unread);
  dropRetiring(c);
  const finish = () => {
    const resynced = c.lastResume?.resynced === true && c.resyncedOn === socket;
    const info: ResumeInfo = {
      recovered: wasRecovering && !resynced,
      wasRecovering,
      replayed: synced.replayed,
      resynced,
    };
    c.lastResume = info;
    c.setConnection('live', false);
    c.tabs?.post({ t: 'conn', connection: 'live', resume: info, lastResume: info });
    c.events.emit('resume', info);
    c.emitState();
    scheduleRefresh(c);
    c.acks.flush();
  };
  if (c.needSnapshot && !c.resyncPending) {
    // First connection of this client: the history comes from a listing (with read marks), up to the
    // offset the stream starts after; what follows arrives on the stream.
    void loadSnapshot(c, socket, synced.lastOffset).then(finish);
  } else if (c.resyncPending) {
    void c.resyncPending.then(finish);
  } else finish();
}

function socketLost(c: Core, socket: HeraldSocket, retryAfterMs?: number): void {
  if (socket === c.socket) dropSocket(c);
  // A refresh in progress whose new socket failed: the old one is still live.
  if (c.retiring?.connected) {
    c.socket = c.retiring;
    c.retiring = undefined;
    scheduleRefresh(c, 5000);
    return;
  }
  if (c.closed || c.suspended || c.role === 'follower') return;
  c.setConnection(c.offline() ? 'offline' : 'reconnecting');
  scheduleRetry(c, retryAfterMs);
}

function scheduleRetry(c: Core, atLeastMs = 0): void {
  if (c.closed || c.suspended || c.retryTimer || c.connection === 'unauthorized') return;
  if (c.offline()) {
    c.setConnection('offline');
    return; // `online` retries
  }
  const delay = Math.max(atLeastMs, backoffDelay(c.attempt++, c.options.backoff));
  c.log('retry', { delay, attempt: c.attempt });
  c.retryTimer = setTimeout(() => {
    c.retryTimer = undefined;
    void open(c);
  }, delay);
}

function scheduleRefresh(c: Core, overrideMs?: number): void {
  clearTimeout(c.refreshTimer);
  const delay = overrideMs ?? (c.token ? refreshDelay(tokenClaims(c.token)) : undefined);
  if (delay === undefined) return;
  c.refreshTimer = setTimeout(() => {
    const current = c.socket;
    if (!current?.connected || c.closed) return;
    c.log('refreshing token');
    c.tokenRefused = true; // fetch a new one
    void open(c, current);
  }, delay);
}

/** Kills a socket that stopped receiving server pings (a zombie after sleep, a dead path). */
export function checkWatchdog(c: Core): void {
  const socket = c.socket;
  if (!socket?.connected || c.silenceLimitMs === 0) return;
  if (Date.now() - c.lastServerPing <= c.silenceLimitMs) return;
  c.log('watchdog: no server ping', { silentMs: Date.now() - c.lastServerPing });
  c.error = { code: 'HERALD_ERR_PING_TIMEOUT', message: 'The server stopped answering: reconnecting.' };
  socketLost(c, socket);
}

export function dropSocket(c: Core): void {
  const socket = c.socket;
  c.socket = undefined;
  if (socket) {
    socket.disconnect();
    socket.removeAllListeners();
    socket.io.removeAllListeners();
  }
}

/** Closes the socket a token refresh replaced. */
function dropRetiring(c: Core): void {
  const retiring = c.retiring;
  c.retiring = undefined;
  retiring?.disconnect();
  retiring?.removeAllListeners();
}

/** Closes the socket (and the one a refresh replaces) and stops every timer. */
export function stopSocket(c: Core): void {
  clearTimeout(c.retryTimer);
  c.retryTimer = undefined;
  clearTimeout(c.refreshTimer);
  clearInterval(c.watchdog);
  dropSocket(c);
  dropRetiring(c);
}
