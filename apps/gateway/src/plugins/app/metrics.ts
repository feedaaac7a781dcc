import { jobCountsOf } from '@herald/config';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { createMetrics, type GatewayMetrics } from '../../metrics.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** Prometheus metrics, served by `GET /metrics`. */
    metrics: GatewayMetrics;
  }
}

/** The gateway's metrics, and the tally of every answer (method, route, status). */
export default fp(
  async (app: FastifyInstance) => {
    const queues = () => [...app.queues, ...app.earlierQueues()];
    const metrics = createMetrics(() => app.withRedisTimeout(jobCountsOf(queues())), queues);
    app.decorate('metrics', metrics);
    // Callback style: no promise per request.
    app.addHook('onResponse', (request, reply, done) => {
      metrics.requests.add(request.method, request.routeOptions.url ?? 'unknown', reply.statusCode);
      done();
    });
  },
  { name: 'metrics', dependencies: ['redis', 'queue'], fastify: '5.x' },
);
