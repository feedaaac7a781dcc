import { Gauge, type Registry } from 'prom-client';

/**
 * How long a scrape waits for the queue depth: a frozen or paused Redis keeps its connections and
 * answers nothing, and a scrape that waited for it would time out whole (Prometheus: 10 s by default),
 * every other metric of the instance lost with it.
 */
export const QUEUE_DEPTH_TIMEOUT_MS = 1000;

/**
 * `herald_queue_jobs{state}`: the notification queue's jobs by state, read from Redis on every scrape
 * (`queueCounts`, e.g. BullMQ's `queue.getJobCounts()`), in `registry`. The gateway and the worker both
 * report it, so either one's scrape shows the backlog. With Redis down, or not answering within
 * {@link QUEUE_DEPTH_TIMEOUT_MS}, the scrape still answers, with the last known depth.
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
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), QUEUE_DEPTH_TIMEOUT_MS);
      });
      try {
        const counts = await Promise.race([queueCounts(), late]);
        for (const [state, count] of Object.entries(counts ?? {})) this.set({ state }, count);
      } catch {
        // Redis down: the scrape still answers, with the last known depth.
      } finally {
        clearTimeout(timer);
      }
    },
  });
}
