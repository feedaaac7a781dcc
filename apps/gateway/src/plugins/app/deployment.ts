import { DeploymentFingerprint } from '@herald/config';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

declare module 'fastify' {
  interface FastifyInstance {
    /** This gateway's entry in its deployment's registry: `/readyz` reports settings other apps disagree on. */
    fingerprint: DeploymentFingerprint;
  }
}

/** Registers the settings the gateway must share with the worker and realtime (`HERALD_DEPLOYMENT`). */
export default fp(
  async (app: FastifyInstance) => {
    const fingerprint = new DeploymentFingerprint(app.redis, {
      deployment: app.config.deployment.name,
      app: 'gateway',
      instanceId: app.config.instanceId,
      settings: app.config.deployment.settings,
    });
    fingerprint.start();
    app.decorate('fingerprint', fingerprint);
    app.addHook('onClose', async () => fingerprint.stop());
  },
  { name: 'deployment', dependencies: ['config', 'redis'], fastify: '5.x' },
);
