import type { InboxOffset } from '@herald/protocol';
import { InboxError, InboxErrorCode, shown } from './errors.js';

/** The offset before the first notification of any inbox: `lastOffset: ZERO_OFFSET` replays everything kept. */
export const ZERO_OFFSET: InboxOffset = '0-0';

/** An offset taken apart: `ms` (time of the append) and `seq` (1, 2, 3, … per user, without holes). */
export interface ParsedOffset {
  ms: number;
  seq: number;
}

const OFFSET = /^(\d{1,15})-(\d{1,15})$/;

/**
 * True when `value` is an offset (`<ms>-<seq>`, both decimal integers).
 *
 * @example
 * ```ts
 * isOffset('1718000000000-42'); // true
 * isOffset('42');               // false
 * ```
 */
export function isOffset(value: unknown): value is InboxOffset {
  return typeof value === 'string' && OFFSET.test(value);
}

/**
 * Takes an offset apart.
 *
 * @throws {InboxError} `HERALD_ERR_INBOX_INVALID_OFFSET` when `offset` is not `<ms>-<seq>`.
 * @example
 * ```ts
 * parseOffset('1718000000000-42'); // { ms: 1718000000000, seq: 42 }
 * ```
 */
export function parseOffset(offset: string): ParsedOffset {
  // A string first: `exec` would stringify anything else (a client's deeply nested array overflows).
  const match = typeof offset === 'string' ? OFFSET.exec(offset) : null;
  if (!match) {
    throw new InboxError(
      InboxErrorCode.INVALID_OFFSET,
      `${shown(offset)} is not an inbox offset: pass the \`offset\` of a notification (<ms>-<seq>).`,
    );
  }
  return { ms: Number(match[1]), seq: Number(match[2]) };
}

/**
 * Orders two offsets: negative when `a` comes first, 0 when equal, positive when `b` comes first.
 * (String comparison is wrong: `'9-1' > '10-1'`.)
 *
 * @example
 * ```ts
 * compareOffsets('9-1', '10-1'); // < 0
 * ```
 */
export function compareOffsets(a: InboxOffset, b: InboxOffset): number {
  const x = parseOffset(a);
  const y = parseOffset(b);
  return x.ms !== y.ms ? x.ms - y.ms : x.seq - y.seq;
}

/**
 * The `seq` part of an offset: the notification's position in its user's inbox, 1-based.
 *
 * @example
 * ```ts
 * offsetSeq('1718000000000-42'); // 42
 * ```
 */
export function offsetSeq(offset: InboxOffset): number {
  return parseOffset(offset).seq;
}
