import type { FastifyRequest } from 'fastify';
import { ErrorCode, HttpError } from '../../errors.js';

const NOT_CONFIGURED =
  'escalateAfterMs needs Web Push, which this deployment has not configured: the operator sets HERALD_VAPID_PUBLIC_KEY (gateway, worker, realtime) and HERALD_VAPID_PRIVATE_KEY, HERALD_VAPID_SUBJECT (worker); or send without escalateAfterMs';

/**
 * Why `item` cannot be taken as it is: `escalateAfterMs` on a deployment without Web Push (a notification
 * that would never escalate must not be accepted as if it would). Undefined when it is fine.
 */
export function escalationRefusal(
  request: FastifyRequest,
  item: { escalateAfterMs?: unknown },
  field: string,
): { code: typeof ErrorCode.PUSH_NOT_CONFIGURED; error: string; details: unknown } | undefined {
  // Not a number: the schema's 400 names what is wrong with it.
  if (typeof item.escalateAfterMs !== 'number' || request.server.config.pushEnabled) return undefined;
  return {
    code: ErrorCode.PUSH_NOT_CONFIGURED,
    error: NOT_CONFIGURED,
    details: [{ field, message: 'needs Web Push (HERALD_VAPID_*), which is off' }],
  };
}

/** Step of `POST /notify`'s `preValidation` (`checkSend`): {@link escalationRefusal} as a 422, before the body costs anything. */
export function checkEscalation(request: FastifyRequest): void {
  const body = request.body as { escalateAfterMs?: unknown } | null;
  if (typeof body !== 'object' || body === null) return;
  const refusal = escalationRefusal(request, body, 'body.escalateAfterMs');
  if (refusal) throw new HttpError(refusal.code, refusal.error, { details: refusal.details });
}
