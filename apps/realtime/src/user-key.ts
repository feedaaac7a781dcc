import type { SocketData } from '@herald/protocol';

/**
 * The one string that names a socket's user in this process's per-user limits (connection slots,
 * event buckets). Computed here only, so that when users become `(tenant, userId)` this is the one
 * place that changes.
 */
export function userKeyOf(data: Pick<SocketData, 'userId'>): string {
  return data.userId;
}
