import type { InboxOffset, NotificationEvent, UnreadEvent } from '@herald/protocol';
import { backoffDelay } from './backoff.js';
import { run } from './commands.js';
import { getToken, open, stopSocket, tokenFailed } from './connection.js';
import type { Core, SharedState } from './core.js';
import { type HeraldError, HeraldUnauthorizedError } from './errors.js';
import { resync } from './inbox-sync.js';
import { compareOffsets } from './offsets.js';
import { TabElection, type TabMessage } from './tabs.js';
import { tokenClaims } from './token.js';
import type { ConnectionState, ResumeInfo } from './types.js';

// One socket per browser and user: the leader tab holds it and shares what it hears with the follower
// tabs over `BroadcastChannel`; followers send their commands to the leader.

/** Joins the tab election (or, without tab sharing, just connects). */
export async function start(c: Core): Promise<void> {
  const locks = c.locks;
  const makeChannel = c.makeChannel;
  if (c.role === 'solo' || !locks || !makeChannel) {
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
      if (c.closed || error instanceof HeraldUnauthorizedError) {
        tokenFailed(c, error);
        return;
      }
      c.events.emit('error', error);
      await new Promise((resolve) => setTimeout(resolve, backoffDelay(c.attempt++, c.options.backoff)));
    }
  }
  if (c.closed || c.tabs) return;
  const claims = tokenClaims(token);
  const url = typeof c.options.url === 'string' ? c.options.url : 'herald';
  const name = `herald:v1:${url}:${claims.tid ?? ''}/${claims.sub ?? ''}`;
  c.tabs = new TabElection({
    name,
    locks,
    channel: makeChannel(name),
    heartbeatMs: c.options.heartbeatMs ?? 2000,
    leaderTimeoutMs: c.options.leaderTimeoutMs ?? 6000,
    maySteal: () => c.visible(),
    onLead: () => lead(c),
    onFollow: () => follow(c),
    onMessage: (message) => onTabMessage(c, message),
  });
  c.tabs.start();
  follow(c);
}

function lead(c: Core): void {
  if (c.closed) return;
  c.log('leading');
  c.role = 'leader';
  c.emitState();
  c.attempt = 0;
  void open(c);
  // Requests a follower sent to the old leader are answered by us now: followers resend them.
  c.tabs?.post({ t: 'state', state: c.shareableState() });
}

export function follow(c: Core): void {
  if (c.closed) return;
  const wasLeader = c.role === 'leader';
  c.role = 'follower';
  stopSocket(c);
  if (wasLeader) c.log('stepped down');
  c.tabs?.post({ t: 'hello' });
  c.emitState();
}

function onTabMessage(c: Core, message: TabMessage): void {
  const leading = c.role === 'leader';
  switch (message.t) {
    case 'hello':
      if (leading) c.tabs?.post({ t: 'state', to: message.from, state: c.shareableState() });
      return;
    case 'lead':
      // A new leader: resend what the old one did not answer.
      c.requests.resend();
      return;
    case 'focus':
      c.focusedTab = message.from;
      return;
    case 'req':
      if (leading) void answer(c, message);
      return;
    case 'ack':
      if (leading) c.acks.add(message.ids as string[]);
      return;
  }
  if (!leading) onLeaderMessage(c, message);
}

/** What the leader shares with its followers. */
function onLeaderMessage(c: Core, message: TabMessage): void {
  switch (message.t) {
    case 'state': {
      if (message.to !== undefined && message.to !== c.tabs?.id) return;
      const state = message.state as SharedState;
      const before = c.store.lastOffset;
      if (state.reset) c.store.clear();
      c.store.setUnread(state.unread);
      // Only what is newer than this tab had is news; the rest is history (a first state, a reload).
      for (const item of c.store.merge(state.items))
        if (before !== undefined && compareOffsets(item.offset, before) > 0)
          c.emitNotification(item, true, false);
      c.needSnapshot = false;
      if (state.lastOffset) c.store.advanceTo(state.lastOffset);
      c.lastResume = state.lastResume;
      c.setConnection(state.connection, false);
      c.emitState();
      return;
    }
    case 'n': {
      const event = message.event as NotificationEvent;
      const outcome = c.store.add(event);
      c.store.setUnread(event.unread);
      if (outcome.kind === 'duplicate') {
        c.emitState();
        return;
      }
      // A gap can only mean this tab missed the leader's messages: ask for its whole state.
      if (outcome.kind === 'gap') c.tabs?.post({ t: 'hello' });
      c.emitNotification(
        c.itemOf(event.offset) ?? { ...event, read: false },
        message.replayed === true,
        message.toast === c.tabs?.id,
      );
      c.emitState();
      return;
    }
    case 'unread':
      if (c.store.setUnread(message.unread as UnreadEvent)) c.emitState();
      return;
    case 'read':
      c.store.markRead(message.ids as string[]);
      c.store.setUnread(message.unread as UnreadEvent | undefined);
      c.emitState();
      return;
    case 'read-all':
      c.store.markAllRead(message.upTo as InboxOffset | undefined);
      c.store.setUnread(message.unread as UnreadEvent | undefined);
      c.emitState();
      return;
    case 'conn':
      c.lastResume = (message.lastResume as ResumeInfo | undefined) ?? c.lastResume;
      c.setConnection(message.connection as ConnectionState, false);
      if (message.resume) c.events.emit('resume', message.resume as ResumeInfo);
      return;
    case 'res':
      c.requests.settle(message);
      return;
  }
}

/** The leader runs a follower's command and posts the outcome back. */
async function answer(c: Core, message: TabMessage): Promise<void> {
  const reply = (body: Record<string, unknown>) =>
    c.tabs?.post({ t: 'res', to: message.from, id: message.id, ...body });
  try {
    const value =
      message.op === 'resync' ? await resync(c) : await run(c, message.op as string, message.args);
    reply({ ok: true, value });
  } catch (error) {
    const { code = 'HERALD_ERR_UNAVAILABLE', message: text = String(error) } = error as HeraldError;
    reply({ ok: false, error: { code, message: text } });
  }
}
