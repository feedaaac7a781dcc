import { Gauge, type Registry } from 'prom-client';

/**
 * `herald_queue_jobs{state}`: the notification queue's jobs by state, read from Redis on every scrape
 * (`queueCounts`, e.g. BullMQ's `queue.getJobCounts()`), in `registry`. The gateway and the worker both
 * report it, so either one's scrape shows the backlog. With Redis down the scrape still answers, with the
 * last known depth.
 *
 * @example
 * ```ts
 * queueDepthGauge(registry, () => queue.getJobCounts());
 * ```
 */
export function queueDepthGauge(
  registry: Registry,
  queueCounts: () => Promise<Record<string, number>>,
): Gauge<'state'> {
  return new Gauge({
    name: 'herald_queue_jobs',
    help: 'Jobs in the notification queue by state (read on scrape)',
    labelNames: ['state'],
    registers: [registry],
    async collect() {
      try {
        const counts = await queueCounts();
        for (const [state, count] of Object.entries(counts)) this.set({ state }, count);
      } catch {
        // Redis down: the scrape still answers, with the last known depth.
      }
    },
  });
}
