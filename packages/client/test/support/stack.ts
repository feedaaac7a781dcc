import { Stack as ProcessStack } from '@herald/e2e/support';
import { redisUrl } from '@herald/testing';

export { API_KEY, appended, connections, notify, randomId } from '@herald/e2e/support';

/**
 * The e2e suite's process stack (gateway, worker and realtime servers, each its own OS process, on
 * random Redis names) with the client tests' settings.
 */
export class Stack extends ProcessStack {
  constructor(extra: Record<string, string> = {}) {
    super(redisUrl(), {
      // One job at a time: the inbox order is then the send order, which the tests compare with.
      HERALD_WORKER_CONCURRENCY: '1',
      // The tests send bursts to one user.
      HERALD_RATE_LIMIT_BURST: '1000',
      HERALD_RATE_LIMIT_PER_SECOND: '1000',
      ...extra,
    });
  }
}
