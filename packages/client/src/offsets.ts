import type { InboxOffset } from '@herald/protocol';

/** `<ms>-<seq>` as two numbers; `seq` counts a user's notifications 1, 2, 3, … without holes. */
export function parseOffset(offset: InboxOffset): { ms: number; seq: number } {
  const dash = offset.indexOf('-');
  return { ms: Number(offset.slice(0, dash)), seq: Number(offset.slice(dash + 1)) };
}

/** Orders two inbox offsets (negative, zero, positive), as Redis orders stream ids. */
export function compareOffsets(a: InboxOffset, b: InboxOffset): number {
  const x = parseOffset(a);
  const y = parseOffset(b);
  return x.ms - y.ms || x.seq - y.seq;
}

/** True for a string shaped like an inbox offset (as the server checks it: up to 15 digits each). */
export function isOffset(value: unknown): value is InboxOffset {
  return typeof value === 'string' && /^\d{1,15}-\d{1,15}$/.test(value);
}
