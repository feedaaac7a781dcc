import { Inbox } from '@herald/inbox';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { cancel, statusOf, type TenantStatus } from '../../status.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** Users' inboxes (`app.inbox.tenant(tenantId)`). */
    inbox: Inbox;
    /** Notification `id` of `tenantId`, or undefined (another tenant's answers like a missing one). */
    statusOf(tenantId: string, id: string): Promise<TenantStatus | undefined>;
    /** Cancels notification `id` of `tenantId` unless it is stored already (see `cancel` in status.ts). */
    cancelNotification(
      tenantId: string,
      id: string,
    ): Promise<{ cancelled: boolean; status: TenantStatus } | undefined>;
  }
}

/**
 * The inbox, a notification's status (its job's state merged with the inbox's markers) and its cancel.
 */
export default fp(
  async (app: FastifyInstance) => {
    const inbox = new Inbox(app.redis, app.config.inbox);
    app.decorate('inbox', inbox);
    app.decorate('statusOf', (tenantId: string, id: string) => statusOf(app.queue, inbox, tenantId, id));
    app.decorate('cancelNotification', (tenantId: string, id: string) =>
      cancel(app.queue, inbox, tenantId, id),
    );
  },
  { name: 'inbox', dependencies: ['config', 'redis', 'queue'], fastify: '5.x' },
);
