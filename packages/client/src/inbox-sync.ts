import type {
  InboxListPage,
  InboxOffset,
  NotificationEvent,
  ResyncEvent,
  UnreadEvent,
} from '@herald/protocol';
import { ask } from './commands.js';
import type { Core, HeraldSocket } from './core.js';
import { HeraldError } from './errors.js';
import { compareOffsets } from './offsets.js';
import type { AddOutcome } from './store.js';

// The inbox held in step with the server's: the stream, its gaps, and the snapshots (first connection, resync).

/** A notification on the leader's (or solo tab's) socket. */
export function onStream(c: Core, event: NotificationEvent): void {
  // Before `synced` it is the replay; once live (the old socket of a token refresh included) it is new.
  const replayed = c._connection !== 'live';
  const toastTab = replayed ? undefined : toastTabOf(c);
  const outcome = received(c, event, replayed, !replayed && (toastTab ?? c._tabs?.id) === c._tabs?.id);
  if (outcome.kind === 'duplicate') return;
  c._tabs?.post({ t: 'n', event, replayed, toast: toastTab });
  if (outcome.kind === 'gap') void fill(c, outcome.after, outcome.before);
}

/** A notification from the stream or the leader tab: stored, reported once (a duplicate is dropped). */
export function received(c: Core, event: NotificationEvent, replayed: boolean, toast: boolean): AddOutcome {
  const outcome = c._store.add(event);
  c._store.setUnread(event.unread);
  if (outcome.kind !== 'duplicate')
    c._emitNotification(c._itemOf(event.offset) ?? { ...event, read: false }, replayed, toast);
  c._emitState();
  return outcome;
}

/** Read marks made elsewhere (another device, through the server; the leader tab): ids, then the count. */
export function readMarks(
  c: Core,
  ids: readonly string[] | undefined,
  unread: UnreadEvent | undefined,
): void {
  // Not an array (a stand-in's `unread` event, passed on to the other tabs as it came): no ids.
  c._store.markRead(Array.isArray(ids) ? ids : []);
  c._store.setUnread(unread);
  c._emitState();
}

/** The server no longer has the offset resumed from: the inbox is reloaded before the socket is live. */
export function onResync(c: Core, resync: Partial<ResyncEvent>, socket: HeraldSocket): void {
  c._log('resync', { ...resync });
  c._store.clear();
  c._store.advanceTo(resync.lastOffset);
  c._needSnapshot = true;
  c._resyncedOn = socket;
  c._lastResume = { recovered: false, wasRecovering: true, replayed: 0, resynced: true };
  c._resyncPending = loadSnapshot(c, socket, resync.lastOffset).finally(() => {
    c._resyncPending = undefined;
  });
}

/** Drops the inbox held and reloads it (`HeraldClient.resync`); a follower asks the leader to. */
export async function resync(c: Core): Promise<void> {
  if (c._role === 'follower') {
    await c._requests.send('resync', {});
    return;
  }
  c._store.clear();
  c._needSnapshot = true;
  await loadSnapshot(c, c._socket, undefined, true);
}

/** Reloads the newest `maxItems` of the inbox (newest page first) up to `upTo`, silently. */
export function loadSnapshot(
  c: Core,
  socket: HeraldSocket | undefined,
  upTo: InboxOffset | undefined,
  rethrow = false,
): Promise<void> {
  c._snapshotLoading ??= (async () => {
    try {
      // The newest page first; older ones only while fewer than `maxItems` came.
      let before: InboxOffset | undefined;
      let left = c._store.maxItems;
      do {
        const listing = await listOn(c, socket, { newest: true, before, limit: Math.min(left, 1000) });
        // Up to `upTo`; all of them without one, or with one not of Herald's shape (a stand-in's synced or
        // resync), which compares as NaN: never greater.
        c._store.merge(listing.items.filter((item) => !(upTo && compareOffsets(item.offset, upTo) > 0)));
        c._store.setUnread(listing.unread);
        left -= listing.items.length;
        // null (the oldest kept) ends the loop before it is sent.
        before = listing.nextBefore as InboxOffset | undefined;
      } while (before && left > 0);
      c._needSnapshot = false;
      c._tabs?.post({ t: 'state', state: c._shareableState(true) });
      c._emitState();
    } finally {
      c._snapshotLoading = undefined;
    }
  })();
  const loading = c._snapshotLoading;
  // resync() tells its caller; the client's own reloads report on `error` and go on.
  return rethrow ? loading : loading.catch((error: unknown) => c._events.emit('error', error));
}

/** Reads the notifications between two offsets from the inbox (a gap on the stream). */
async function fill(c: Core, after: InboxOffset, before: InboxOffset): Promise<void> {
  if (c._fillLoading) return;
  c._fillLoading = true;
  try {
    // Page after page while the server says there is more (it cuts a page at its limit or its size).
    let from: InboxOffset | null | undefined = after;
    do {
      const listing = await listOn(c, c._socket, { after: from, limit: 1000 });
      for (const item of c._store.merge(
        listing.items.filter((item) => compareOffsets(item.offset, before) < 0),
      )) {
        c._tabs?.post({ t: 'n', event: item, replayed: true });
        c._emitNotification(item, true);
      }
      from = listing.nextAfter as InboxOffset | null;
    } while (from && compareOffsets(from, before) < 0);
    c._emitState();
  } catch (error) {
    c._events.emit('error', error);
  } finally {
    c._fillLoading = false;
  }
}

async function listOn(
  c: Core,
  socket: HeraldSocket | undefined,
  args: { after?: InboxOffset; before?: InboxOffset | undefined; newest?: boolean; limit: number },
): Promise<InboxListPage> {
  if (!socket) throw new HeraldError('HERALD_ERR_NOT_CONNECTED', `Not connected (${c._connection}).`);
  return (await ask(c, socket, 'list', args)) as unknown as InboxListPage;
}

/** Which tab shows a toast: the last one that got focus while visible, else the leader (undefined). */
function toastTabOf(c: Core): string | undefined {
  return c._page?.document?.hasFocus?.() || !c._tabs ? undefined : c._focusedTab;
}
