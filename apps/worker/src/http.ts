import { createServer, type Server } from 'node:http';
import { listenFailure } from '@herald/config';
import { exposition, queueDepthGauge, queueStallGauge, type WatchedQueue } from '@herald/config/metrics';
import { operationsHandler } from '@herald/config/operations';
import { Counter, collectDefaultMetrics, Histogram, Registry } from 'prom-client';

/** The worker's Prometheus metrics, in a registry of its own. */
export interface WorkerMetrics {
  registry: Registry;
  /**
   * `herald_worker_jobs_total{outcome}`: jobs processed, by outcome: `appended`, `already-appended`,
   * `expired`, `deduplicated`, `cancelled`, `muted`, `retry` (an attempt failed, another will follow), `failed` (for good).
   */
  jobs: Counter<'outcome'>;
  /** `herald_worker_job_duration_seconds`: time to store a notification and push it live. */
  duration: Histogram;
  /**
   * `herald_worker_webhooks_total{outcome}`: webhook message runs, by outcome: `delivered`, `retry`,
   * `failed` (every attempt), `held` (parked endpoint), `busy` (the endpoint's slots were taken: waits),
   * `dropped` (no webhook, or no longer subscribed to that event).
   */
  webhooks: Counter<'outcome'>;
  /**
   * `herald_worker_escalations_total{outcome}`: Web Push escalations settled, by outcome: `acked` (a tab
   * acked it first), `pushed`, `skipped`; and `herald_worker_pushes_total{outcome}`: push requests, by
   * outcome: `sent`, `gone` (404/410: removed), `rejected` (other 4xx), `retry` (429, 5xx, network).
   */
  escalations: Counter<'outcome'>;
  pushes: Counter<'outcome'>;
}

/**
 * Creates the metrics; `queueCounts` is asked on every scrape for the queue depth by state, and
 * `queues` for the partitions whose line `herald_queue_stalled_seconds` watches.
 */
export function createMetrics(
  queueCounts: () => Promise<Record<string, number>>,
  queues: () => readonly WatchedQueue[] = () => [],
): WorkerMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'herald_worker_' });
  queueDepthGauge(registry, queueCounts);
  queueStallGauge(registry, queues);
  return {
    registry,
    jobs: new Counter({
      name: 'herald_worker_jobs_total',
      help: 'Notification jobs processed, by outcome',
      labelNames: ['outcome'],
      registers: [registry],
    }),
    duration: new Histogram({
      name: 'herald_worker_job_duration_seconds',
      help: 'Time to store a notification in its inbox and push it live',
      buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5],
      registers: [registry],
    }),
    webhooks: new Counter({
      name: 'herald_worker_webhooks_total',
      help: 'Webhook message runs, by outcome',
      labelNames: ['outcome'],
      registers: [registry],
    }),
    escalations: new Counter({
      name: 'herald_worker_escalations_total',
      help: 'Web Push escalations settled, by outcome',
      labelNames: ['outcome'],
      registers: [registry],
    }),
    pushes: new Counter({
      name: 'herald_worker_pushes_total',
      help: 'Web Push requests to push services, by outcome',
      labelNames: ['outcome'],
      registers: [registry],
    }),
  };
}

/**
 * Starts the worker's operations server on `port` (0: any free port): `/healthz` (liveness, never
 * Redis), `/readyz` (Redis and the queue answer, Redis takes writes), `/metrics`. It starts before the worker has reached
 * Redis, so `ready` and `metrics` are asked late: until then `/readyz` is 503 and `/metrics` empty.
 */
export async function startHttp(options: {
  port: number;
  host: string;
  instanceId: string;
  /** Resolves when Redis and the queue answer and Redis takes writes. */
  ready: () => Promise<unknown>;
  metrics: () => WorkerMetrics | undefined;
  /** Settings this worker and the other apps of its deployment disagree on. */
  mismatches?: () => Promise<string[]>;
}): Promise<{ server: Server; port: number; close(): Promise<void> }> {
  const server = createServer(
    operationsHandler({
      health: () => ({ instanceId: options.instanceId }),
      ready: options.ready,
      ...(options.mismatches ? { mismatches: options.mismatches } : {}),
      metrics: async () => {
        const registry = options.metrics()?.registry;
        return registry
          ? await exposition(registry)
          : { contentType: 'text/plain; version=0.0.4; charset=utf-8', body: '' };
      },
      notFound: 'Not found: the worker serves /healthz, /readyz and /metrics',
    }),
  );
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error) => reject(listenFailure(error, options)));
    server.listen(options.port, options.host, () => resolve());
  });
  const address = server.address();
  return {
    server,
    port: typeof address === 'object' && address ? address.port : options.port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
