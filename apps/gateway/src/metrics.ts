import { queueDepthGauge, queueStallGauge, type WatchedQueue } from '@herald/config/metrics';
import type { PolicyCounters } from '@herald/rate-limiter';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

/**
 * Requests answered, counted in plain numbers per (method, route, status) and handed to prom-client on
 * scrape: prom-client hashes the labels on every `inc`, which was a visible share of a denied request.
 */
export class RequestTally {
  readonly #counts = new Map<string, { method: string; route: string; status: string; count: number }>();

  add(method: string, route: string, status: number): void {
    const id = `${method} ${status} ${route}`;
    const entry = this.#counts.get(id);
    if (entry === undefined) this.#counts.set(id, { method, route, status: String(status), count: 1 });
    else entry.count++;
  }

  entries(): Iterable<{ method: string; route: string; status: string; count: number }> {
    return this.#counts.values();
  }
}

/** The gateway's Prometheus metrics, in a registry of its own (so several apps can live in one test process). */
export interface GatewayMetrics {
  registry: Registry;
  /** Feeds `herald_http_requests_total`. */
  requests: RequestTally;
  enqueueSeconds: Histogram;
  /** `herald_envelopes_total{reason}`: envelopes sent, by what sent them (see EnvelopeFlush). */
  envelopes: Counter<'reason'>;
  queueDepth: Gauge<'state'>;
  /**
   * Where `herald_ratelimit_decisions_total` reads its totals on scrape: the limiters' own counters per
   * policy (set by the app once its limits exist; nothing is counted twice per request).
   */
  decisionTotals: () => Readonly<Record<string, PolicyCounters>>;
  /** Where `herald_envelope_waiting_requests` reads on scrape (set once the envelopes exist). */
  envelopeWaiting: () => number;
}

const OUTCOMES = [
  ['allowed', 'allowed'],
  ['denied', 'denied'],
  ['deniedLocally', 'denied_locally'],
  ['fallback', 'fallback'],
] as const;

/**
 * Creates the metrics. `queueCounts` is asked on every scrape for the queue depth by state, and `queues`
 * for the partitions whose line `herald_queue_stalled_seconds` watches.
 */
export function createMetrics(
  queueCounts: () => Promise<Record<string, number>>,
  queues: () => readonly WatchedQueue[] = () => [],
): GatewayMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'herald_gateway_' });
  queueStallGauge(registry, queues);
  const requests = new RequestTally();
  const metrics: GatewayMetrics = {
    registry,
    requests,
    decisionTotals: () => ({}),
    envelopeWaiting: () => 0,
    enqueueSeconds: new Histogram({
      name: 'herald_enqueue_duration_seconds',
      help: 'Time to put notifications durably into the queue',
      buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
      registers: [registry],
    }),
    envelopes: new Counter({
      name: 'herald_envelopes_total',
      help: 'Envelopes (queue jobs of many notifications) sent, by reason: full, linger (its time was up), idle (every request held was waiting for one), shutdown',
      labelNames: ['reason'],
      registers: [registry],
    }),
    queueDepth: queueDepthGauge(registry, queueCounts),
  };
  new Gauge({
    name: 'herald_envelope_waiting_requests',
    help: 'Requests to enqueue held by the gateway while their limiter decision or their envelope is gathered, until answered',
    registers: [registry],
    collect() {
      this.set(metrics.envelopeWaiting());
    },
  });
  new Counter({
    name: 'herald_http_requests_total',
    help: 'HTTP requests answered, by route and status',
    labelNames: ['method', 'route', 'status'],
    registers: [registry],
    collect() {
      this.reset();
      for (const { method, route, status, count } of requests.entries()) {
        this.inc({ method, route, status }, count);
      }
    },
  });
  new Counter({
    name: 'herald_ratelimit_decisions_total',
    help: 'Rate-limit decisions by policy and outcome (allowed, denied, denied_locally, fallback)',
    labelNames: ['policy', 'outcome'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [policy, counters] of Object.entries(metrics.decisionTotals())) {
        for (const [field, outcome] of OUTCOMES) {
          if (counters[field] > 0) this.inc({ policy, outcome }, counters[field]);
        }
      }
    },
  });
  return metrics;
}
