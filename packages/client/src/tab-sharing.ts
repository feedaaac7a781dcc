import type { InboxOffset, NotificationEvent, UnreadChangeEvent, UnreadEvent } from '@herald/protocol';
import { backoffDelay } from './backoff.js';
import { run } from './commands.js';
import { getToken, open, stopSocket, tokenFailed, tokenUnavailable } from './connection.js';
import type { Core, SharedState } from './core.js';
import { type HeraldError, HeraldUnauthorizedError } from './errors.js';
import { readMarks, received, resync } from './inbox-sync.js';
import { compareOffsets } from './offsets.js';
import { TabElection, type TabMessage } from './tabs.js';
import { tokenClaims } from './token.js';
import type { ConnectionState, ResumeInfo } from './types.js';

// One socket per browser and user: the leader tab holds it and shares what it hears with the follower
// tabs over `BroadcastChannel`; followers send their commands to the leader.

/** Joins the tab election (or, without tab sharing, just connects). */
export async function start(c: Core): Promise<void> {
  const locks = c._locks;
  const makeChannel = c._makeChannel;
  if (c._role === 'solo' || !locks || !makeChannel) {
    await open(c);
    return;
  }
  // The lock is per user: a token tells who (another user of this browser gets another leader).
  let token: string;
  for (;;) {
    try {
      token = await getToken(c);
      break;
    } catch (error) {
      if (c._closed || error instanceof HeraldUnauthorizedError) {
        tokenFailed(c, error);
        return;
      }
      tokenUnavailable(c, error);
      await new Promise((resolve) => setTimeout(resolve, backoffDelay(c._attempt++, c._options.backoff)));
    }
  }
  if (c._closed || c._tabs) return;
  const claims = tokenClaims(token);
  const url = typeof c._options.url === 'string' ? c._options.url : 'herald';
  const name = `herald:v1:${url}:${claims.tid ?? ''}/${claims.sub ?? ''}`;
  c._tabs = new TabElection({
    name,
    locks,
    channel: makeChannel(name),
    heartbeatMs: c._options.heartbeatMs ?? 2000,
    leaderTimeoutMs: c._options.leaderTimeoutMs ?? 6000,
    maySteal: () => c._visible(),
    onLead: () => lead(c),
    onFollow: () => follow(c),
    onMessage: (message) => onTabMessage(c, message),
  });
  c._tabs.start();
  follow(c);
}

function lead(c: Core): void {
  if (c._closed) return;
  c._log('leading');
  c._role = 'leader';
  c._emitState();
  c._attempt = 0;
  void open(c);
  // What this tab asked while it followed (or before it won the election) is answered here now.
  c._requests.runHere(c, runHere);
  // Requests a follower sent to the old leader are answered by us now: followers resend them.
  c._tabs?.post({ t: 'state', state: c._shareableState() });
}

export function follow(c: Core): void {
  if (c._closed) return;
  const wasLeader = c._role === 'leader';
  c._role = 'follower';
  stopSocket(c);
  if (wasLeader) c._log('stepped down');
  c._tabs?.post({ t: 'hello' });
  c._emitState();
}

function onTabMessage(c: Core, message: TabMessage): void {
  const leading = c._role === 'leader';
  switch (message.t) {
    case 'hello':
      if (leading) c._tabs?.post({ t: 'state', to: message.from, state: c._shareableState() });
      return;
    case 'lead':
      // A new leader: resend what the old one did not answer.
      c._requests.resend();
      return;
    case 'focus':
      c._focusedTab = message.from;
      return;
    case 'req':
      if (leading) void answer(c, message);
      return;
  }
  if (!leading) onLeaderMessage(c, message);
}

/** What the leader shares with its followers. */
function onLeaderMessage(c: Core, message: TabMessage): void {
  switch (message.t) {
    case 'state': {
      if (message.to !== undefined && message.to !== c._tabs?.id) return;
      const state = message.state as SharedState;
      const before = c._store.lastOffset;
      if (state.reset) c._store.clear();
      c._store.setUnread(state.unread);
      // Only what is newer than this tab had is news; the rest is history (a first state, a reload).
      for (const item of c._store.merge(state.items))
        if (before !== undefined && compareOffsets(item.offset, before) > 0) c._emitNotification(item, true);
      c._needSnapshot = false;
      c._store.advanceTo(state.lastOffset);
      c._lastResume = state.lastResume;
      c._setConnection(state.connection, false);
      c._emitState();
      return;
    }
    case 'n':
      // A gap can only mean this tab missed the leader's messages: ask for its whole state.
      if (
        received(
          c,
          message.event as NotificationEvent,
          message.replayed === true,
          message.toast === c._tabs?.id,
        ).kind === 'gap'
      )
        c._tabs?.post({ t: 'hello' });
      return;
    case 'unread': {
      const unread = message.unread as UnreadChangeEvent;
      readMarks(c, unread.read, unread);
      return;
    }
    case 'read':
      readMarks(c, message.ids as string[], message.unread as UnreadEvent | undefined);
      return;
    case 'read-all':
      c._store.markAllRead(message.upTo as InboxOffset | undefined);
      readMarks(c, [], message.unread as UnreadEvent | undefined);
      return;
    case 'conn':
      c._lastResume = (message.lastResume as ResumeInfo | undefined) ?? c._lastResume;
      c._setConnection(message.connection as ConnectionState, false);
      if (message.resume) c._events.emit('resume', message.resume as ResumeInfo);
      return;
    case 'res':
      c._requests.settle(message);
      return;
  }
}

/** A command run by this tab, the leader: a follower's, or its own from before it led. */
const runHere = (c: Core, op: string, args: unknown) => (op === 'resync' ? resync(c) : run(c, op, args));

/** The leader runs a follower's command and posts the outcome back. */
async function answer(c: Core, message: TabMessage): Promise<void> {
  const reply = (body: Record<string, unknown>) =>
    c._tabs?.post({ t: 'res', to: message.from, id: message.id, ...body });
  try {
    const value = await runHere(c, message.op as string, message.args);
    reply({ ok: true, value });
  } catch (error) {
    const { code = 'HERALD_ERR_UNAVAILABLE', message: text = String(error) } = error as HeraldError;
    reply({ ok: false, error: { code, message: text } });
  }
}
