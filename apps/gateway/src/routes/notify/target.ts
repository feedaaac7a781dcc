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
  const problem = targetProblem(body);
  if (problem) {
    throw new HttpError(ErrorCode.VALIDATION, `Invalid request: ${problem.field} ${problem.message}`, {
      details: [problem],
    });
  }
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
