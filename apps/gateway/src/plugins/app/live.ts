import { type LivePublisher, livePublisher } from '@herald/live';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

declare module 'fastify' {
  interface FastifyInstance {
    /** Pushes unread counts to the user's connected tabs after a REST read. */
    live: LivePublisher;
  }
}

/** The live publisher (the Herald live channel, read by the realtime servers). */
export default fp(
  async (app: FastifyInstance) => {
    // Fire-and-forget: a tab that misses an unread count gets the exact count with its next change.
    const onLiveError = (error: unknown) => app.log.warn({ err: error }, 'live publish failed');
    app.decorate('live', livePublisher(app.redis, app.config.pubsub, onLiveError));
  },
  { name: 'live', dependencies: ['config', 'redis'], fastify: '5.x' },
);
