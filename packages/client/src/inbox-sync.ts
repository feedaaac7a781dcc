import type { InboxListPage, InboxOffset, ListReply, NotificationEvent, ResyncEvent } from '@herald/protocol';
import type { Core, HeraldSocket } from './core.js';
import { HeraldError } from './errors.js';
import { compareOffsets } from './offsets.js';

// The inbox held in step with the server's: the stream, its gaps, and the snapshots (first connection, resync).

/** A notification on the leader's (or solo tab's) socket. */
export function onStream(c: Core, event: NotificationEvent): void {
  const outcome = c.store.add(event);
  c.store.setUnread(event.unread);
  if (outcome.kind === 'duplicate') {
    c.emitState();
    return;
  }
  // Before `synced` it is the replay; once live (the old socket of a token refresh included) it is new.
  const replayed = c.connection !== 'live';
  const toastTab = replayed ? undefined : toastTabOf(c);
  c.tabs?.post({ t: 'n', event, replayed, toast: toastTab });
  if (outcome.kind === 'gap') void fill(c, outcome.after, outcome.before);
  c.emitNotification(
    c.itemOf(event.offset) ?? { ...event, read: false },
    replayed,
    !replayed && (toastTab === undefined || toastTab === c.tabs?.id),
  );
  c.emitState();
}

/** The server no longer has the offset resumed from: the inbox is reloaded before the socket is live. */
export function onResync(c: Core, resync: ResyncEvent, socket: HeraldSocket): void {
  c.log('resync', { reason: resync.reason, lastOffset: resync.lastOffset });
  c.store.clear();
  c.store.advanceTo(resync.lastOffset);
  c.needSnapshot = true;
  c.resyncedOn = socket;
  c.lastResume = { recovered: false, wasRecovering: true, replayed: 0, resynced: true };
  c.resyncPending = loadSnapshot(c, socket, resync.lastOffset).finally(() => {
    c.resyncPending = undefined;
  });
}

/** Drops the inbox held and reloads it (`HeraldClient.resync`); a follower asks the leader to. */
export async function resync(c: Core): Promise<void> {
  if (c.role === 'follower') {
    await c.requests.send('resync', {});
    return;
  }
  c.store.clear();
  c.needSnapshot = true;
  await loadSnapshot(c, c.socket, undefined, true);
}

/** Reloads the inbox (oldest first, keeping the newest `maxItems`) up to `upTo`, silently. */
export function loadSnapshot(
  c: Core,
  socket: HeraldSocket | undefined,
  upTo: InboxOffset | undefined,
  rethrow = false,
): Promise<void> {
  c.snapshotLoading ??= (async () => {
    try {
      let after: InboxOffset | undefined;
      for (let page = 0; page < 20; page++) {
        const listing = await listOn(c, socket, { ...(after ? { after } : {}), limit: 1000 });
        const items =
          upTo === undefined
            ? listing.items
            : listing.items.filter((item) => compareOffsets(item.offset, upTo) <= 0);
        c.store.merge(items);
        c.store.setUnread(listing.unread);
        if (listing.nextAfter === null || items.length < listing.items.length) break;
        after = listing.nextAfter;
      }
      c.needSnapshot = false;
      c.tabs?.post({ t: 'state', state: c.shareableState(true) });
      c.emitState();
    } finally {
      c.snapshotLoading = undefined;
    }
  })();
  const loading = c.snapshotLoading;
  // resync() tells its caller; the client's own reloads report on `error` and go on.
  return rethrow ? loading : loading.catch((error: unknown) => c.events.emit('error', error));
}

/** Reads the notifications between two offsets from the inbox (a gap on the stream). */
async function fill(c: Core, after: InboxOffset, before: InboxOffset): Promise<void> {
  if (c.fillLoading) return;
  c.fillLoading = true;
  try {
    const listing = await listOn(c, c.socket, { after, limit: 1000 });
    const missing = listing.items.filter((item) => compareOffsets(item.offset, before) < 0);
    for (const item of c.store.merge(missing)) {
      c.tabs?.post({ t: 'n', event: item, replayed: true });
      c.emitNotification(item, true, false);
    }
    c.emitState();
  } catch (error) {
    c.events.emit('error', error);
  } finally {
    c.fillLoading = false;
  }
}

async function listOn(
  c: Core,
  socket: HeraldSocket | undefined,
  args: { after?: InboxOffset; limit: number },
): Promise<InboxListPage> {
  if (!socket) throw new HeraldError('HERALD_ERR_NOT_CONNECTED', 'Not connected.');
  const reply = (await socket.timeout(c.timeoutMs).emitWithAck('list', args)) as ListReply;
  if (!reply.ok) throw new HeraldError(reply.code, reply.error);
  const { ok: _ok, ...page } = reply;
  return page;
}

/** Which tab shows a toast: the last one that got focus while visible, else the leader (undefined). */
function toastTabOf(c: Core): string | undefined {
  const focused = c.page?.document?.hasFocus?.() ?? false;
  if (focused || !c.tabs) return undefined;
  return c.focusedTab;
}
