import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { GatewayConfig } from '../../config.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** The gateway's settings, parsed once at start-up (config.ts). */
    config: GatewayConfig;
  }
}

/** Decorates the app with its settings: every other plugin reads them from `app.config`. */
export default fp<{ config: GatewayConfig }>(
  async (app: FastifyInstance, { config }) => {
    app.decorate('config', config);
  },
  { name: 'config', fastify: '5.x' },
);
