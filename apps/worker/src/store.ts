import type { AppendBounds, AppendResult, Inbox, InboxNotification } from '@herald/inbox';
import type { LivePublisher } from '@herald/live';
import type { NotificationOptions } from '@herald/protocol';

/** The options of {@link Inbox.append} a job asks for. */
export interface AppendOptions {
  expiresAtMs?: number;
  dedupeKey?: string;
  bounds?: AppendBounds;
  indexed?: boolean;
}

/** A job's append options: its deadline (`createdAt` + `ttlMs`), dedupe key and its key's inbox bounds. */
export function appendOptionsOf(
  job: Pick<NotificationOptions, 'ttlMs' | 'dedupeKey'> & {
    createdAt: string;
    inbox?: AppendBounds | undefined;
  },
): AppendOptions {
  const createdAtMs = Date.parse(job.createdAt);
  return {
    ...(job.ttlMs !== undefined && Number.isFinite(createdAtMs)
      ? { expiresAtMs: createdAtMs + job.ttlMs }
      : {}),
    ...(job.dedupeKey !== undefined ? { dedupeKey: job.dedupeKey } : {}),
    ...(job.inbox !== undefined ? { bounds: job.inbox } : {}),
  };
}

/**
 * Appends `notification` to its user's inbox of `inbox`'s tenant (idempotent: a second run is stored
 * once), waits for `durable` (replicas, when asked), then pushes it live. A run again after its append (stalled, retried) pushes again with the same
 * offset, and realtime drops what a socket already has, so it is on screen once; and a push lost in a
 * crash between append and push is made good by that second run.
 */
export async function storeAndPush(
  inbox: Inbox,
  live: LivePublisher,
  notification: InboxNotification,
  options: AppendOptions,
  durable?: (inbox: Inbox, userId: string) => Promise<void>,
): Promise<AppendResult> {
  const result = await inbox.append(notification, options);
  // Before anyone is shown it: an entry a failover loses after its push would be shown, then gone, and
  // its offset given to the next notification (which the client would take for one it has).
  await durable?.(inbox, notification.userId);
  if (result.outcome === 'appended' || result.outcome === 'already-appended') {
    // The new unread count rides on the notification (one pub/sub message, not two); a re-run does
    // not carry it, as its count may be stale.
    live.notification(inbox.tenantId, {
      ...notification,
      offset: result.offset,
      ...(result.outcome === 'appended' ? { unread: result.unread } : {}),
    });
  }
  return result;
}
