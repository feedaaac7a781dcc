import { type SocketData, userKey } from '@herald/protocol';

/**
 * The one string that names a socket's user in this process's per-user limits (connection slots,
 * event buckets): `<tenant>/<user>` ({@link userKey}), so that one tenant's `alice` never shares a slot
 * or a bucket with another tenant's.
 */
export function userKeyOf(data: Pick<SocketData, 'userId' | 'tenantId'>): string {
  return userKey(data.tenantId, data.userId);
}
