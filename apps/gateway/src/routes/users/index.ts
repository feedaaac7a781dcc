import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { isOffset, MAX_PAGE } from '@herald/inbox';
import { ErrorResponse, notificationIdOf, UserId } from '@herald/protocol';
import Type from 'typebox';
import { ErrorCode, HttpError } from '../../errors.js';
import { INBOX_POLICY } from '../../limits.js';

const Offset = Type.String({ pattern: '^\\d+-\\d+$', description: 'An inbox offset `<ms>-<seq>`' });
const Unread = Type.Object({ count: Type.Integer(), version: Type.Integer() });

const InboxItem = Type.Object({
  id: Type.String(),
  offset: Offset,
  userId: Type.String(),
  payload: Type.Record(Type.String(), Type.Unknown()),
  createdAt: Type.String(),
  topic: Type.Optional(Type.String()),
  type: Type.Optional(Type.String()),
  read: Type.Boolean(),
  deliveredAt: Type.Union([Type.String(), Type.Null()]),
});

/** What the inbox routes answer besides 200: bad input, no key, over the key's inbox limit, Redis down. */
const INBOX_ERRORS = { 400: ErrorResponse, 401: ErrorResponse, 429: ErrorResponse, 503: ErrorResponse };

const ReadBody = Type.Union([
  Type.Object(
    { ids: Type.Array(Type.String({ minLength: 1, maxLength: 128 }), { minItems: 1, maxItems: 1000 }) },
    { additionalProperties: false },
  ),
  Type.Object({ all: Type.Literal(true), upTo: Type.Optional(Offset) }, { additionalProperties: false }),
]);

/**
 * A user's inbox for the backend: list it, mark it read. A key acts only on its own tenant's users:
 * `/users/alice` is the key's tenant's alice (another tenant's alice is another user). Within a tenant,
 * any of its keys may act for any user id (the backend decides who its users are).
 */
const userRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const limited = { onRequest: app.authenticate, config: { rateLimit: app.limits.perApiKey(INBOX_POLICY) } };
  app.get(
    '/users/:userId/notifications',
    {
      ...limited,
      schema: {
        summary: "A page of a user's inbox, oldest first",
        description:
          '`after` is exclusive (absent: from the oldest kept); follow `nextAfter` until it is null. `trimmed: true` means notifications right after `after` are gone (the inbox is bounded by count and age). With `newest=true` or `before` (not with `after`) the page is read backwards: the `limit` newest, or the `limit` just before `before` (exclusive), still oldest first; follow `nextBefore` until it is null (`nextAfter` is then null).',
        params: Type.Object({ userId: UserId }),
        querystring: Type.Object(
          {
            after: Type.Optional(Offset),
            before: Type.Optional(Offset),
            newest: Type.Optional(Type.Boolean()),
            limit: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_PAGE, default: 50 })),
          },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Object({
            items: Type.Array(InboxItem),
            nextAfter: Type.Union([Offset, Type.Null()]),
            nextBefore: Type.Optional(Type.Union([Offset, Type.Null()])),
            trimmed: Type.Boolean(),
            unread: Unread,
          }),
          ...INBOX_ERRORS,
        },
      },
    },
    async (request) => {
      const { userId } = request.params;
      const { after, before, newest, limit } = request.query;
      checkListQuery({ after, before, newest });
      const inbox = app.inbox.tenant(request.identity.tenantId);
      return app.inboxCall('The inbox (Redis)', () =>
        inbox.list(userId, { after, before, newest, limit: limit ?? 50 }),
      );
    },
  );

  app.post(
    '/users/:userId/notifications/read',
    {
      ...limited,
      schema: {
        summary: 'Mark notifications read',
        description:
          '`{ "ids": [...] }` marks those; `{ "all": true, "upTo"?: offset }` marks everything (up to and including `upTo`). Every connected tab of the user receives the new unread count.',
        params: Type.Object({ userId: UserId }),
        body: ReadBody,
        response: {
          200: Type.Object({ changed: Type.Integer(), unread: Unread }),
          ...INBOX_ERRORS,
        },
      },
    },
    async (request) => {
      const { userId } = request.params;
      const body = request.body;
      if ('upTo' in body && body.upTo !== undefined && !isOffset(body.upTo)) throw notAnOffset('body.upTo');
      const { tenantId } = request.identity;
      const inbox = app.inbox.tenant(tenantId);
      const result = await app.inboxCall(
        'The inbox (Redis)',
        () =>
          inbox.markRead(
            userId,
            'ids' in body
              ? { ids: body.ids.map(notificationIdOf) }
              : { all: true, ...(body.upTo ? { upTo: body.upTo } : {}) },
          ),
        true,
      );
      if (result.changed > 0) app.live.unread(tenantId, userId, { ...result.unread, read: result.ids });
      // Reported in the background: the read has happened whether or not its webhook is enqueued.
      app.webhooks.events
        .read(tenantId, userId, result.ids, result.readAtMs)
        .catch((error: unknown) => request.log.warn({ err: error, tenantId }, 'webhook event not enqueued'));
      return { changed: result.changed, unread: result.unread };
    },
  );
};

export default userRoutes;

const NOT_AN_OFFSET =
  'is not an inbox offset: <ms>-<seq>, each at most 15 digits (the offset of a notification)';

/** The 400 for `field`, of an offset's shape (the schema's) but no offset an inbox can hold. */
function notAnOffset(field: string): HttpError {
  return new HttpError(ErrorCode.VALIDATION, `Invalid request: ${field} ${NOT_AN_OFFSET}`, {
    details: [{ field, message: NOT_AN_OFFSET }],
  });
}

/**
 * The listing's query as the inbox takes it, else a 400 naming the parameter: `after` with `before` or
 * `newest`, an offset of the schema's shape that no inbox holds (more than 15 digits a part).
 */
function checkListQuery(query: {
  after?: string | undefined;
  before?: string | undefined;
  newest?: boolean | undefined;
}): void {
  const problems: { field: string; message: string }[] = [];
  if (query.after !== undefined && (query.before !== undefined || query.newest === true)) {
    problems.push({
      field: 'querystring.after',
      message: 'cannot be combined with before or newest=true (they read backwards)',
    });
  }
  for (const name of ['after', 'before'] as const) {
    const value = query[name];
    if (value !== undefined && !isOffset(value))
      problems.push({ field: `querystring.${name}`, message: NOT_AN_OFFSET });
  }
  const [first] = problems;
  if (first !== undefined) {
    throw new HttpError(ErrorCode.VALIDATION, `Invalid request: ${first.field} ${first.message}`, {
      details: problems,
    });
  }
}
