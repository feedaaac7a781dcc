import { createHash } from 'node:crypto';
import { notificationIdFor } from '@herald/inbox';

/**
 * The id of item `index` of a request's `count` notifications, sent to `userId`: routed to the slot of
 * the user's inbox ({@link notificationIdFor}: its record is found from the id alone, so the worker
 * writes no id index). With an `Idempotency-Key` (`derivedId`, see `IdempotencyStore.derivedId`) the
 * same id on every retry, one per item; else random.
 *
 * @example
 * ```ts
 * notificationId('alice'); // a random routed id
 * notificationId('alice', request.idempotency.derivedId, 2, 5); // item 2's, the same on a retry
 * ```
 */
export function notificationId(userId: string, derivedId?: string, index = 0, count = 1): string {
  if (derivedId === undefined) return notificationIdFor(userId);
  const seed =
    count === 1
      ? derivedId.replaceAll('-', '')
      : createHash('sha256').update(`${derivedId}\n${index}`).digest('hex');
  return notificationIdFor(userId, seed);
}
