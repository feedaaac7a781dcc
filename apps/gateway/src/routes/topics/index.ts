import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import {
  ErrorResponse,
  SUBSCRIBERS_PAGE_MAX,
  SubscribersChanged,
  SubscribersPage,
  SubscribersRequest,
  TopicName,
  UserId,
} from '@herald/protocol';
import Type from 'typebox';
import { INBOX_POLICY } from '../../limits.js';

/** What the topic routes answer besides 200: bad input, no key, over the key's inbox limit, Redis down. */
const TOPIC_ERRORS = { 400: ErrorResponse, 401: ErrorResponse, 429: ErrorResponse, 503: ErrorResponse };
const TopicParams = Type.Object({ topic: TopicName });
const SubscriberParams = Type.Object({ topic: TopicName, userId: UserId });

/**
 * A tenant's topics: subscribe and unsubscribe its users, one or up to 1,000 at a time, and list a
 * topic's subscribers with a cursor. A key acts on its own tenant's topics only (`orders` of another
 * tenant is another topic). Limited per API key like the inbox routes (`inbox` policy).
 */
const topicRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const limited = { onRequest: app.authenticate, config: { rateLimit: app.limits.perApiKey(INBOX_POLICY) } };
  const change = async (tenantId: string, topic: string, userIds: string[], subscribe: boolean) => {
    const topics = app.topics.tenant(tenantId);
    const result = await app.inboxCall(
      'Topics (Redis)',
      () => (subscribe ? topics.subscribe(topic, userIds) : topics.unsubscribe(topic, userIds)),
      true,
    );
    return { topic, ...result };
  };

  app.put(
    '/topics/:topic/subscribers',
    {
      ...limited,
      schema: {
        summary: 'Subscribe users to a topic (up to 1,000)',
        description:
          'Idempotent: users already subscribed stay so (`changed` counts the new ones). A subscriber is also one of the tenant’s users (a broadcast reaches them).',
        params: TopicParams,
        body: SubscribersRequest,
        response: { 200: SubscribersChanged, ...TOPIC_ERRORS },
      },
    },
    async (request) => change(request.identity.tenantId, request.params.topic, request.body.userIds, true),
  );

  app.delete(
    '/topics/:topic/subscribers',
    {
      ...limited,
      schema: {
        summary: 'Unsubscribe users from a topic (up to 1,000)',
        description: 'Idempotent: `changed` counts those that were subscribed.',
        params: TopicParams,
        body: SubscribersRequest,
        response: { 200: SubscribersChanged, ...TOPIC_ERRORS },
      },
    },
    async (request) => change(request.identity.tenantId, request.params.topic, request.body.userIds, false),
  );

  app.put(
    '/topics/:topic/subscribers/:userId',
    {
      ...limited,
      schema: {
        summary: 'Subscribe one user to a topic',
        params: SubscriberParams,
        response: { 200: SubscribersChanged, ...TOPIC_ERRORS },
      },
    },
    async (request) => change(request.identity.tenantId, request.params.topic, [request.params.userId], true),
  );

  app.delete(
    '/topics/:topic/subscribers/:userId',
    {
      ...limited,
      schema: {
        summary: 'Unsubscribe one user from a topic',
        params: SubscriberParams,
        response: { 200: SubscribersChanged, ...TOPIC_ERRORS },
      },
    },
    async (request) =>
      change(request.identity.tenantId, request.params.topic, [request.params.userId], false),
  );

  app.get(
    '/topics/:topic/subscribers',
    {
      ...limited,
      schema: {
        summary: "A page of a topic's subscribers, in user id order",
        description:
          '`after` is exclusive (absent: from the first); follow `nextAfter` until it is null. The cursor is a user id, so a page never repeats nor skips a subscriber that stays subscribed while you page.',
        params: TopicParams,
        querystring: Type.Object(
          {
            after: Type.Optional(UserId),
            limit: Type.Optional(Type.Integer({ minimum: 1, maximum: SUBSCRIBERS_PAGE_MAX, default: 100 })),
          },
          { additionalProperties: false },
        ),
        response: { 200: SubscribersPage, ...TOPIC_ERRORS },
      },
    },
    async (request) => {
      const { topic } = request.params;
      const topics = app.topics.tenant(request.identity.tenantId);
      const audience = { topic };
      const [page, subscribers] = await app.inboxCall('Topics (Redis)', () =>
        Promise.all([
          topics.page(audience, request.query.after, request.query.limit ?? 100),
          topics.size(audience),
        ]),
      );
      return { topic, userIds: page.userIds, nextAfter: page.nextAfter, subscribers };
    },
  );
};

export default topicRoutes;
