import type { NotificationEvent } from '@herald/protocol';
import { InboxError, InboxErrorCode } from './errors.js';
import { MAX_PAGE } from './types.js';

export function toEvent(offset: string, fields: string[]): NotificationEvent {
  for (let i = 0; i < fields.length; i += 2) {
    if (fields[i] === 'n') {
      const stored = JSON.parse(fields[i + 1] ?? '{}') as Omit<NotificationEvent, 'offset'>;
      return { ...stored, offset };
    }
  }
  throw new InboxError(InboxErrorCode.UNEXPECTED_REPLY, `inbox entry ${offset} has no notification`);
}

export function checkUserId(userId: string): string {
  if (typeof userId !== 'string' || userId.length === 0) {
    throw new InboxError(InboxErrorCode.INVALID_ARGUMENT, 'userId must be a non-empty string');
  }
  return userId;
}

/** A per-call bound: at most the inbox's own, and only a positive integer counts. */
export function boundOf(requested: number | undefined, own: number): number {
  return requested !== undefined && Number.isInteger(requested) && requested >= 1 && requested < own
    ? requested
    : own;
}

export function checkLimit(limit: number): number {
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE) {
    throw new InboxError(
      InboxErrorCode.INVALID_ARGUMENT,
      `limit must be an integer from 1 to ${MAX_PAGE}, not ${limit}`,
    );
  }
  return limit;
}

export function checkIds(ids: readonly string[]): void {
  if (!Array.isArray(ids) || ids.length > MAX_PAGE || ids.some((id) => typeof id !== 'string' || id === '')) {
    throw new InboxError(
      InboxErrorCode.INVALID_ARGUMENT,
      `ids must be an array of at most ${MAX_PAGE} non-empty strings`,
    );
  }
}
