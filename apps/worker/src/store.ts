import { ReplicaWaiter } from '@herald/config';
import type { AppendBounds, AppendResult, Inbox, InboxNotification } from '@herald/inbox';
import type { LivePublisher } from '@herald/live';
import type { NotificationOptions } from '@herald/protocol';
import type { Cluster, Redis } from 'ioredis';

/** How long the worker waits for `HERALD_REDIS_WAIT_REPLICAS` replicas to have an inbox entry, ms. */
const REPLICA_WAIT_MS = 1000;
/** How long a job waits for its inbox's master to have those replicas at all (after a failover), ms. */
const REPLICA_READY_MS = 3000;

/** Waits until a user's inbox writes are durable as configured (see {@link replicaDurability}). */
export type Durability = (inbox: Inbox, userId: string) => Promise<void>;

/**
 * With `replicas` > 0 (`HERALD_REDIS_WAIT_REPLICAS`), what {@link storeAndPush} waits for before a push:
 * `WAIT` on the connection of the user's slot, which carried the append (one WAIT per connection and
 * event-loop turn for every append there); a miss fails the attempt, which is retried. After a failover
 * the promoted master has no replica until one rejoins: the append waits for it (up to
 * {@link REPLICA_READY_MS}) rather than failing its attempt into the retry backoff. Undefined with 0.
 */
export function replicaDurability(redis: Redis | Cluster, replicas: number): Durability | undefined {
  if (replicas <= 0) return undefined;
  const waiter = new ReplicaWaiter(redis, replicas, REPLICA_WAIT_MS);
  return async (userInbox, userId) => {
    const key = userInbox.keys(userId).stream;
    await waiter.ready(key, REPLICA_READY_MS);
    await waiter.wait(key);
  };
}

/** The options of {@link Inbox.append} a job asks for. */
export interface AppendOptions {
  expiresAtMs?: number;
  dedupeKey?: string;
  bounds?: AppendBounds;
  indexed?: boolean;
  /** Its job runs again (stalled or retried): see Inbox.append. */
  rerun?: boolean;
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
  durable?: Durability,
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
