import { ErrorCode } from '@herald/protocol';
import type { FastifyReply } from 'fastify';
import type { WebConfig } from './config.js';

/** How long each upstream's `/healthz` may take before this server reports not ready. */
const UPSTREAM_TIMEOUT_MS = 1000;

/**
 * `GET /readyz`: `200 { status: 'ok' }` when the pages are built and the gateway and the realtime
 * servers answer their `/healthz` within {@link UPSTREAM_TIMEOUT_MS}; otherwise `503 { error, code:
 * 'HERALD_ERR_UNAVAILABLE' }` naming what is missing (a balancer then sends browsers elsewhere).
 */
export function readiness(config: WebConfig, built: () => boolean) {
  const upstreams = { gateway: config.gatewayUrl, realtime: config.realtimeUrl };
  return async (_request: unknown, reply: FastifyReply) => {
    const problems: string[] = [];
    if (!built()) problems.push(`no built page in ${config.publicDir} (run the build)`);
    await Promise.all(
      Object.entries(upstreams).map(async ([name, url]) => {
        try {
          const response = await fetch(`${url}/healthz`, {
            signal: AbortSignal.timeout(UPSTREAM_TIMEOUT_MS),
          });
          if (!response.ok) problems.push(`${name} at ${url} answered ${response.status}`);
          await response.body?.cancel();
        } catch (error) {
          problems.push(`${name} at ${url} does not answer (${(error as Error).message})`);
        }
      }),
    );
    if (problems.length === 0) return reply.send({ status: 'ok' });
    return reply
      .status(503)
      .send({ error: `Not ready: ${problems.join('; ')}.`, code: ErrorCode.UNAVAILABLE });
  };
}
