import type { IncomingMessage, ServerResponse } from 'node:http';
import { credentialsRefused } from '@herald/config';
import { exposition } from '@herald/config/metrics';
import { operationsHandler } from '@herald/config/operations';
import type { Cluster, Redis } from 'ioredis';
import { Counter, collectDefaultMetrics, Gauge, Registry } from 'prom-client';

/** The realtime server's Prometheus metrics, in a registry of its own. */
export interface RealtimeMetrics {
  registry: Registry;
  /** `herald_realtime_handshakes_refused_total{code}`: handshakes answered with `connect_error`. */
  handshakesRefused: Counter<'code'>;
  /** `herald_realtime_notifications_delivered_total`: `notification` events sent to sockets. */
  delivered: Counter;
  /** `herald_realtime_slow_clients_disconnected_total`: sockets dropped with too much waiting for their client. */
  slowClients: Counter;
}

/**
 * Creates the metrics; `sockets` is read on every scrape for `herald_realtime_sockets`, `backlogBytes` for
 * `herald_realtime_socket_backlog_bytes`.
 */
export function createMetrics(sockets: () => number, backlogBytes: () => number = () => 0): RealtimeMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'herald_realtime_' });
  new Gauge({
    name: 'herald_realtime_sockets',
    help: 'Sockets connected to this instance',
    registers: [registry],
    collect() {
      this.set(sockets());
    },
  });
  new Gauge({
    name: 'herald_realtime_socket_backlog_bytes',
    help: 'Bytes sent to sockets that their clients have not read yet (all sockets of this instance)',
    registers: [registry],
    collect() {
      this.set(backlogBytes());
    },
  });
  return {
    registry,
    handshakesRefused: new Counter({
      name: 'herald_realtime_handshakes_refused_total',
      help: 'Handshakes refused (connect_error), by code',
      labelNames: ['code'],
      registers: [registry],
    }),
    delivered: new Counter({
      name: 'herald_realtime_notifications_delivered_total',
      help: 'notification events sent to sockets (replayed and live)',
      registers: [registry],
    }),
    slowClients: new Counter({
      name: 'herald_realtime_slow_clients_disconnected_total',
      help: 'Sockets disconnected because their client did not read what it was sent (over 8 MiB waiting)',
      registers: [registry],
    }),
  };
}

/**
 * The realtime server's plain HTTP answers (Socket.IO takes `/socket.io/` before they run):
 * `/healthz` (liveness and load, never Redis: connected sockets and memory; `?gc=1` first collects
 * garbage when the process runs with --expose-gc, which the delivery benchmark uses), `/readyz` (both
 * Redis connections answer, Redis takes writes) and `/metrics`.
 */
export function httpHandler(options: {
  instanceId: string;
  sockets: () => number;
  redis: readonly (Redis | Cluster)[];
  /**
   * Resolves when Redis takes writes (`checkWritable`): a Redis at maxmemory answers PING, but refuses
   * the reads a handshake makes in a transaction (Redis refuses every command queued in MULTI when
   * full) as well as acks and read marks.
   */
  writable?: () => Promise<unknown>;
  metrics: RealtimeMetrics;
  /** Settings this instance and the other apps of its deployment disagree on. */
  mismatches?: () => Promise<string[]>;
}): (request: IncomingMessage, response: ServerResponse) => void {
  return operationsHandler({
    health(request) {
      const gc = (globalThis as { gc?: () => void }).gc;
      if (request.url?.includes('gc=1') && gc) gc();
      const memory = process.memoryUsage();
      return {
        instanceId: options.instanceId,
        connections: options.sockets(),
        heapUsedBytes: memory.heapUsed,
        rssBytes: memory.rss,
      };
    },
    ready: () => {
      // Redis refusing REDIS_URL's password: said as such, not as a ping that does not answer.
      const refused = options.redis.map(credentialsRefused).find((error) => error !== undefined);
      if (refused) return Promise.reject(refused);
      return Promise.all([...options.redis.map((client) => client.ping()), options.writable?.()]);
    },
    ...(options.mismatches ? { mismatches: options.mismatches } : {}),
    metrics: () => exposition(options.metrics.registry),
    notFound: 'Not found: connect with Socket.IO at /socket.io/',
  });
}
