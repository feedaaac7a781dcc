import { classicPublisher, type LivePublisher, shardedPublisher } from '@herald/inbox';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

declare module 'fastify' {
  interface FastifyInstance {
    /** Pushes unread counts to the user's connected tabs after a REST read. */
    live: LivePublisher;
  }
}

/** The live publisher (pub/sub to the realtime servers). */
export default fp(
  async (app: FastifyInstance) => {
    const { config, redis } = app;
    // Fire-and-forget: a tab that misses an unread count gets the exact count with its next change.
    const onLiveError = (error: unknown) => app.log.warn({ err: error }, 'live publish failed');
    app.decorate(
      'live',
      config.pubsub.mode === 'sharded'
        ? shardedPublisher(redis, config.pubsub.key, onLiveError)
        : classicPublisher(redis, config.pubsub.key, onLiveError),
    );
  },
  { name: 'live', dependencies: ['config', 'redis'], fastify: '5.x' },
);
