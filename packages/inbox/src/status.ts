import type { EscalationStatus } from '@herald/protocol';
import { muteTargetOf } from './scripts.js';
import type { NotificationStatus } from './types.js';

/**
 * A notification's status from its marker hash (`state`, `offset`, `deliveredAt` in ms, `deliveredBy`,
 * `duplicateOf`, `mutedBy`, `tenantId`, `createdAt`) and whether its id is in the user's unread set; undefined when there is no
 * marker (the worker has not processed it yet, or its record expired with the inbox retention).
 */
export function notificationStatus(
  userId: string,
  id: string,
  marker: Record<string, string>,
  unread: boolean,
): NotificationStatus | undefined {
  // A routed marker names its owner: another user of the same slot is told nothing.
  if (marker.state === undefined || (marker.user !== undefined && marker.user !== userId)) return undefined;
  const deliveredAt = marker.deliveredAt ? new Date(Number(marker.deliveredAt)).toISOString() : null;
  return {
    id,
    userId,
    state: marker.state as NotificationStatus['state'],
    offset: marker.offset ?? null,
    delivered: deliveredAt !== null,
    deliveredAt,
    deliveredBy: marker.deliveredBy ?? null,
    read: marker.state === 'inbox' && !unread,
    duplicateOf: marker.duplicateOf ?? null,
    tenantId: marker.tenantId ?? null,
    ...(marker.state === 'cancelled' && marker.at
      ? { cancelledAt: new Date(Number(marker.at)).toISOString() }
      : {}),
    ...escalationOf(marker.escalation),
    // Of one never stored (a stored one's is in its inbox entry: see Inbox.status).
    ...(marker.createdAt ? { createdAt: marker.createdAt } : {}),
    ...(marker.state === 'muted' && marker.mutedBy ? { muted: muteTargetOf(marker.mutedBy) } : {}),
  };
}

/** The marker's `escalation` field (JSON written by `@herald/push`), unless absent or unreadable. */
function escalationOf(raw: string | undefined): { escalation?: EscalationStatus } {
  if (raw === undefined) return {};
  try {
    const escalation = JSON.parse(raw) as EscalationStatus;
    return typeof escalation?.state === 'string' ? { escalation } : {};
  } catch {
    return {};
  }
}
