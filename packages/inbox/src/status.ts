import { muteTargetOf } from './scripts.js';
import type { NotificationStatus } from './types.js';

/**
 * A notification's status from its marker hash (`state`, `offset`, `deliveredAt` in ms, `deliveredBy`,
 * `duplicateOf`, `mutedBy`, `tenantId`) and whether its id is in the user's unread set; undefined when there is no
 * marker (the worker has not processed it yet, or its record expired with the inbox retention).
 */
export function notificationStatus(
  userId: string,
  id: string,
  marker: Record<string, string>,
  unread: boolean,
): NotificationStatus | undefined {
  if (marker.state === undefined) return undefined;
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
    ...(marker.state === 'muted' && marker.mutedBy ? { muted: muteTargetOf(marker.mutedBy) } : {}),
  };
}
