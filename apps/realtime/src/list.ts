import { type Inbox, isOffset, MAX_PAGE } from '@herald/inbox';
import { ErrorCode, type ListReply } from '@herald/protocol';
import type { Logger } from 'pino';
import { withinCommandTime } from './command-args.js';

/** What a `list` body may hold. */
const LIST_KEYS = new Set(['after', 'before', 'newest', 'limit']);

/**
 * The `list` event: a page of the socket's own inbox (its tenant's user), in the REST listing's shape,
 * so that a browser pages through its inbox with its user token and never needs an API key. A body that
 * is no object, or holds a key it does not know, is refused by name (a typo would change the page).
 */
export async function listPage(
  userInbox: Inbox,
  userId: string,
  body: unknown,
  log: Logger,
): Promise<ListReply> {
  if (body !== undefined && body !== null && (typeof body !== 'object' || Array.isArray(body))) {
    return {
      ok: false,
      code: ErrorCode.INBOX_INVALID_ARGUMENT,
      error: 'list takes an object: { after?, before?, newest?, limit? }',
    };
  }
  // A key it does not know is a typo that would silently change the page (as on the HTTP route).
  const unknown = Object.keys(body ?? {}).filter((key) => !LIST_KEYS.has(key));
  if (unknown.length > 0) {
    return {
      ok: false,
      code: ErrorCode.INBOX_INVALID_ARGUMENT,
      error: `list takes after, before, newest and limit, not ${unknown
        .slice(0, 5)
        .map((key) => JSON.stringify(key.slice(0, 64)))
        .join(', ')}`,
    };
  }
  const { after, before, newest, limit = 50 } = (body ?? {}) as Record<string, unknown>;
  for (const [name, value] of [
    ['after', after],
    ['before', before],
  ] as const) {
    if (value !== undefined && !isOffset(value)) {
      return { ok: false, code: ErrorCode.INBOX_INVALID_OFFSET, error: `${name} is not an offset` };
    }
  }
  if (newest !== undefined && typeof newest !== 'boolean') {
    return { ok: false, code: ErrorCode.INBOX_INVALID_ARGUMENT, error: 'newest must be true or false' };
  }
  if (after !== undefined && (before !== undefined || newest === true)) {
    return {
      ok: false,
      code: ErrorCode.INBOX_INVALID_ARGUMENT,
      error: 'after cannot be combined with before or newest',
    };
  }
  if (!Number.isInteger(limit) || (limit as number) < 1 || (limit as number) > MAX_PAGE) {
    return {
      ok: false,
      code: ErrorCode.INBOX_INVALID_ARGUMENT,
      error: `limit must be an integer from 1 to ${MAX_PAGE}`,
    };
  }
  try {
    return {
      ok: true,
      ...(await withinCommandTime(
        userInbox.list(userId, {
          after: after as string | undefined,
          before: before as string | undefined,
          newest: newest === true,
          limit: limit as number,
        }),
      )),
    };
  } catch (error) {
    log.warn({ err: error }, 'list failed');
    return { ok: false, code: ErrorCode.UNAVAILABLE, error: 'Redis unavailable: retry shortly.' };
  }
}
