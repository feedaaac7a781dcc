import { Inbox, InboxError } from '@herald/inbox';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { changeUnavailable, ErrorCode, HttpError, unavailable } from '../../errors.js';
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
    /**
     * `call` (an inbox or topics operation) within the Redis timeout: what the inbox refuses
     * (`InboxError`) is a 400 VALIDATION with its message, any other failure a 503 naming `what`.
     */
    inboxCall<T>(what: string, call: () => Promise<T>, change?: boolean): Promise<T>;
  }
}

/**
 * The inbox, a notification's status (its job's state merged with the inbox's markers) and its cancel,
 * and how routes call the inbox.
 */
export default fp(
  async (app: FastifyInstance) => {
    const inbox = new Inbox(app.redis, app.config.inbox);
    app.decorate('inbox', inbox);
    // The earlier counts' partitions too: what was queued before a change of HERALD_QUEUE_PARTITIONS.
    const queued = {
      get queues() {
        const earlier = app.earlierQueues();
        return earlier.length === 0 ? app.queues : [...app.queues, ...earlier];
      },
      connection: app.queueConnection,
    };
    app.decorate('statusOf', (tenantId: string, id: string) => statusOf(queued, inbox, tenantId, id));
    app.decorate('cancelNotification', (tenantId: string, id: string) => cancel(queued, inbox, tenantId, id));
    app.decorate('inboxCall', async <T>(what: string, call: () => Promise<T>, change = false): Promise<T> => {
      try {
        return await app.withRedisTimeout(call());
      } catch (error) {
        if (error instanceof InboxError) {
          throw new HttpError(ErrorCode.VALIDATION, error.message, { cause: error });
        }
        // A change (a read mark, a subscription) may have been sent, and done: said so when it was.
        throw change ? changeUnavailable(what, error) : unavailable(what, error);
      }
    });
  },
  { name: 'inbox', dependencies: ['config', 'redis', 'queue'], fastify: '5.x' },
);
