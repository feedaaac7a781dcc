import type { IncomingMessage, ServerResponse } from 'node:http';
import { ErrorCode } from '@herald/protocol';
import { RedisCredentialsError } from './credentials.js';
import { RedisOutOfMemoryError } from './out-of-memory.js';
import { ReplicaWaitError } from './redis.js';
import { RedisTopologyError } from './redis-topology.js';

/** How long a readiness check may take before the instance is reported not ready. */
export const READINESS_TIMEOUT_MS = 1000;

/**
 * What `/readyz` answers for a readiness check that failed with `error`, every app alike: the error's
 * own message when it says what to change (a full Redis, refused credentials, a Cluster without every
 * slot, missing replicas), else that Redis or the queue does not answer. A probe accepted nothing.
 */
export function notReadyMessage(error: unknown): string {
  return error instanceof RedisOutOfMemoryError ||
    error instanceof RedisCredentialsError ||
    error instanceof RedisTopologyError ||
    error instanceof ReplicaWaitError
    ? `Not ready: ${error.message}.`
    : `Not ready: Redis or the queue does not answer (${(error as Error)?.message ?? error}); retry shortly.`;
}

/** What an app's operations endpoints report; see {@link operationsHandler}. */
export interface OperationsProbes {
  /** Extra fields of the `/healthz` answer (never a call to Redis: liveness must not depend on it). */
  health?: (request: IncomingMessage) => Record<string, unknown>;
  /**
   * Resolves when the app can serve (Redis, the queue answer); rejects, or takes too long, otherwise
   * (with a `RedisOutOfMemoryError` when Redis refuses writes for memory, a `RedisCredentialsError` when it
   * refuses REDIS_URL's credentials, a `RedisTopologyError` when it is a Cluster node given as one server
   * or the reverse, a `ReplicaWaitError` when the replicas of `HERALD_REDIS_WAIT_REPLICAS` are missing:
   * its message is the answer's).
   */
  ready: () => Promise<unknown>;
  /** The settings this instance and others of its deployment disagree on (`DeploymentFingerprint`). */
  mismatches?: () => Promise<string[]>;
  /** The Prometheus exposition (e.g. prom-client's `registry.metrics()` and `registry.contentType`). */
  metrics: () => Promise<{ contentType: string; body: string }>;
  /** The message of the JSON 404 for any other path. */
  notFound: string;
}

/**
 * The HTTP handler of an app without an HTTP API of its own (worker, realtime): `GET /healthz`
 * (liveness: `200 { status: 'ok', … }` while the process serves, whatever Redis does, so that a Redis
 * blip does not make an orchestrator restart every instance), `GET /readyz` (readiness: `200
 * { status: 'ok' }`, or `503 { error, code: 'HERALD_ERR_UNAVAILABLE' }` when a dependency does not answer
 * within {@link READINESS_TIMEOUT_MS}) and `GET /metrics` (Prometheus). Anything else is a JSON 404.
 *
 * @example
 * ```ts
 * const http = createServer(operationsHandler({ ready: () => redis.ping(), metrics, notFound: 'Not found' }));
 * ```
 */
export function operationsHandler(
  probes: OperationsProbes,
): (request: IncomingMessage, response: ServerResponse) => void {
  const send = (response: ServerResponse, status: number, body: unknown) => {
    response.writeHead(status, { 'content-type': 'application/json' });
    response.end(JSON.stringify(body));
  };
  return (request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      send(response, 404, { error: probes.notFound, code: ErrorCode.NOT_FOUND });
      return;
    }
    if (path === '/healthz') {
      send(response, 200, { status: 'ok', ...probes.health?.(request) });
      return;
    }
    if (path === '/readyz') {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('timed out')), READINESS_TIMEOUT_MS);
      });
      Promise.race([probes.ready(), timeout])
        .then(
          async () => {
            const mismatches = (await probes.mismatches?.().catch(() => [])) ?? [];
            if (mismatches.length === 0) {
              send(response, 200, { status: 'ok' });
              return;
            }
            send(response, 503, {
              error: `Not ready: the apps of this deployment disagree (${mismatches.join('; ')}); give every app the same settings.`,
              code: ErrorCode.DEPLOYMENT_MISMATCH,
              mismatches,
            });
          },
          (error: unknown) =>
            send(response, 503, {
              error: notReadyMessage(error),
              code: ErrorCode.UNAVAILABLE,
            }),
        )
        .finally(() => clearTimeout(timer));
      return;
    }
    if (path === '/metrics') {
      probes.metrics().then(
        ({ contentType, body }) => {
          response.writeHead(200, { 'content-type': contentType });
          response.end(body);
        },
        (error: unknown) =>
          send(response, 500, {
            error: `Metrics failed: ${(error as Error).message}`,
            code: ErrorCode.INTERNAL,
          }),
      );
      return;
    }
    send(response, 404, { error: probes.notFound, code: ErrorCode.NOT_FOUND });
  };
}
