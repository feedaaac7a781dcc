import type { NotifySendRequest } from '@herald/protocol';
import type { FastifyRequest } from 'fastify';
import { ErrorCode, HttpError } from '../../errors.js';

/**
 * Step of `POST /notify`'s `preValidation` (`checkSend`): exactly one target, `userId`, `topic` (without `userId`) or
 * `broadcast: true`, before the body costs anything. Field types are the schema's to check.
 */
export function checkTarget(request: FastifyRequest): void {
  const body = request.body as Partial<NotifySendRequest> | null;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return;
  const problem = targetProblem(body) ?? timingProblem(body);
  if (problem) {
    throw new HttpError(ErrorCode.VALIDATION, `Invalid request: ${problem.field} ${problem.message}`, {
      details: [problem],
    });
  }
}

/**
 * A `ttlMs` not above the `delayMs` of the same send (both count from acceptance): it could only expire,
 * so it is never accepted. Undefined when fine, or when either is not a number (the schema's to name).
 */
export function timingProblem(
  body: { ttlMs?: unknown; delayMs?: unknown },
  root = 'body',
): { field: string; message: string } | undefined {
  const { ttlMs, delayMs } = body;
  if (typeof ttlMs !== 'number' || typeof delayMs !== 'number' || ttlMs > delayMs) return undefined;
  return {
    field: `${root}.ttlMs`,
    message: `must be more than delayMs (${delayMs}): both count from acceptance, so it would expire before it could be delivered`,
  };
}

function targetProblem(body: Partial<NotifySendRequest>): { field: string; message: string } | undefined {
  if (body.broadcast !== undefined && body.userId !== undefined) {
    return { field: 'body.broadcast', message: 'cannot go with userId: a broadcast goes to every user' };
  }
  if (body.broadcast !== undefined && body.topic !== undefined) {
    return { field: 'body.broadcast', message: 'cannot go with topic: send to the topic, or broadcast' };
  }
  if (body.escalateAfterMs !== undefined && body.userId === undefined) {
    return {
      field: 'body.escalateAfterMs',
      message: 'goes with userId only: a topic send or broadcast does not escalate to Web Push',
    };
  }
  if (body.userId === undefined && body.topic === undefined && body.broadcast === undefined) {
    return {
      field: 'body.userId',
      message: 'is required: give a userId, or a topic (to its subscribers), or broadcast: true',
    };
  }
  return undefined;
}
