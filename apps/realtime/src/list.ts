import { type Inbox, isOffset, MAX_PAGE } from '@herald/inbox';
import { ErrorCode, type ListReply } from '@herald/protocol';
import type { Logger } from 'pino';

/**
 * The `list` event: a page of the socket's own inbox (its tenant's user), in the REST listing's shape,
 * so that a browser pages through its inbox with its user token and never needs an API key.
 */
export async function listPage(
  userInbox: Inbox,
  userId: string,
  body: unknown,
  log: Logger,
): Promise<ListReply> {
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
      ...(await userInbox.list(userId, {
        after: after as string | undefined,
        before: before as string | undefined,
        newest: newest === true,
        limit: limit as number,
      })),
    };
  } catch (error) {
    log.warn({ err: error }, 'list failed');
    return { ok: false, code: ErrorCode.UNAVAILABLE, error: 'Redis unavailable: retry shortly.' };
  }
}
