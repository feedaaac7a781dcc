/** A UUID in any case, optionally with the `-<index>` of an earlier gateway's batch items. */
const UUID_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(?:-\d+)?$/i;

/**
 * A notification id as Herald wrote it, from one a client sends back: Herald's ids are UUIDs in lower
 * case, and RFC 9562 reads a UUID case-insensitively, so one given in upper case (a database column that
 * prints them so, such as SQL Server's `uniqueidentifier`) is the same id. Anything else is left as it is
 * (it names no notification, and is answered as such).
 *
 * @example
 * ```ts
 * notificationIdOf('0190F7A2-7C1B-8D3E-9A4B-1C2D3E4F5A6B'); // '0190f7a2-7c1b-8d3e-9a4b-1c2d3e4f5a6b'
 * ```
 */
export function notificationIdOf(id: string): string {
  return UUID_ID.test(id) ? id.toLowerCase() : id;
}
