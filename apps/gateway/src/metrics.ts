import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

/** The gateway's Prometheus metrics, in a registry of its own (so several apps can live in one test process). */
export interface GatewayMetrics {
  registry: Registry;
  requests: Counter<'method' | 'route' | 'status'>;
  limiterDecisions: Counter<'policy' | 'outcome'>;
  enqueueSeconds: Histogram;
  queueDepth: Gauge<'state'>;
}

/**
 * Creates the metrics. `queueCounts` is asked on every scrape for the queue depth by state.
 */
export function createMetrics(queueCounts: () => Promise<Record<string, number>>): GatewayMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'herald_gateway_' });
  return {
    registry,
    requests: new Counter({
      name: 'herald_http_requests_total',
      help: 'HTTP requests answered, by route and status',
      labelNames: ['method', 'route', 'status'],
      registers: [registry],
    }),
    limiterDecisions: new Counter({
      name: 'herald_ratelimit_decisions_total',
      help: 'Rate-limit decisions by policy and outcome (allowed, denied, denied_locally, fallback)',
      labelNames: ['policy', 'outcome'],
      registers: [registry],
    }),
    enqueueSeconds: new Histogram({
      name: 'herald_enqueue_duration_seconds',
      help: 'Time to put notifications durably into the queue',
      buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
      registers: [registry],
    }),
    queueDepth: new Gauge({
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
    }),
  };
}
