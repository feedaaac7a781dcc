import { randomUUID } from 'node:crypto';
import { isOutOfMemory, OUT_OF_MEMORY_ADVICE } from '@herald/config';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { ErrorCode, HttpError, outOfMemory, unavailable } from '../../errors.js';
import { IDEMPOTENCY_KEY_MAX_LENGTH, IdempotencyStore, type StoredAnswer } from '../../idempotency.js';

/** A claimed `Idempotency-Key` of the current request. */
export interface IdempotencyClaim {
  scope: string;
  key: string;
  fingerprint: string;
  /** This request's token in the claim: only it may release the claim. */
  owner: string;
  /** The notification id derived from the key, the request and the key's epoch (an inbox stores an id once): a retry is never delivered twice, even when the record is gone. */
  derivedId: string;
  settled: boolean;
}

declare module 'fastify' {
  interface FastifyInstance {
    idempotency: IdempotencyStore;
    /**
     * Route `preValidation` hook (after authentication, before the limiter) of a route that honours an
     * `Idempotency-Key` header.
     */
    idempotencyCheck: (request: FastifyRequest, reply: FastifyReply) => Promise<void>;
    /** Stores `answer` as the claimed key's first answer (the handler calls this before replying). */
    settleIdempotency(request: FastifyRequest, answer: StoredAnswer): Promise<void>;
  }
  interface FastifyRequest {
    idempotency?: IdempotencyClaim;
  }
}

/**
 * `Idempotency-Key`: the store, the route hook that claims a key or replays its first answer, the
 * settling of an answer, and the release of a key whose request was refused or failed.
 */
export default fp(
  async (app: FastifyInstance) => {
    const { config } = app;
    app.decorate(
      'idempotency',
      new IdempotencyStore({
        redis: app.redis,
        keyPrefix: config.keyPrefix,
        ttlSeconds: config.idempotencyTtlSeconds,
        inFlightMs: config.idempotencyInFlightMs,
      }),
    );
    app.decorateRequest('idempotency', undefined);
    app.decorate('idempotencyCheck', idempotencyPreValidation(app));
    app.decorate('settleIdempotency', (request: FastifyRequest, answer: StoredAnswer) =>
      settleIdempotency(app, request, answer),
    );
    registerIdempotencyRelease(app);
  },
  { name: 'idempotency', dependencies: ['config', 'redis', 'api-keys'], fastify: '5.x' },
);

/**
 * Route hook (`preValidation`, after authentication, before the limiter): with an `Idempotency-Key`
 * header, claims the key for (API key, route, body), or answers from the first request: its stored
 * answer with `Idempotency-Replayed: true`, 409 while it is still in flight, 422 for another body.
 * A replay costs no tokens and enqueues nothing.
 */
function idempotencyPreValidation(app: FastifyInstance) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const header = request.headers['idempotency-key'];
    if (header === undefined) return;
    const key = Array.isArray(header) ? header.join(',') : header;
    if (key.length === 0 || key.length > IDEMPOTENCY_KEY_MAX_LENGTH) {
      throw new HttpError(
        ErrorCode.VALIDATION,
        `Invalid request: headers.idempotency-key must be 1 to ${IDEMPOTENCY_KEY_MAX_LENGTH} characters`,
        {
          details: [
            {
              field: 'headers.idempotency-key',
              message: `must be 1 to ${IDEMPOTENCY_KEY_MAX_LENGTH} characters`,
            },
          ],
        },
      );
    }
    const scope = request.identity.id;
    const fingerprint = IdempotencyStore.fingerprint({ route: request.routeOptions.url, body: request.body });
    const owner = randomUUID();
    const claiming = app.idempotency.begin(scope, key, fingerprint, owner);
    let begun: Awaited<typeof claiming>;
    try {
      begun = await app.withRedisTimeout(claiming);
    } catch (error) {
      // The claim may still land (a stalled Redis wakes up, a failover ends), and would hold the key
      // "in flight" for HERALD_IDEMPOTENCY_IN_FLIGHT_MS: it is released now, behind the claim on the
      // same connection (one Redis keeps their order), and again once the claim itself has settled. On
      // Redis Cluster, ioredis sends a command cut off by a failover again when the slot has a master,
      // after commands sent later: a release ran 170 ms before the claim it was to undo, and the key
      // answered 409 for its whole 5 s (the chaos suite's Cluster failover).
      const release = () => app.idempotency.abandon(scope, key, owner).catch(() => {});
      release();
      claiming.then(release, release);
      // A full Redis refuses the claim (the first write of a keyed send): said so, as an enqueue it
      // refuses is, and logged for the operator.
      if (isOutOfMemory(error)) {
        request.log.warn(
          { err: error },
          `idempotency claim refused, nothing accepted: ${OUT_OF_MEMORY_ADVICE}`,
        );
        throw outOfMemory(error);
      }
      throw unavailable('Redis', error);
    }
    switch (begun.state) {
      case 'new':
        request.idempotency = {
          scope,
          key,
          fingerprint,
          owner,
          derivedId: IdempotencyStore.derivedId(scope, key, fingerprint, begun.epoch),
          settled: false,
        };
        return;
      case 'replay':
        // The log line of a replay names the ids of the first answer, as that answer's did.
        request.notificationIds = idsOf(begun.answer.body);
        await reply
          .code(begun.answer.statusCode)
          .header('Idempotency-Replayed', 'true')
          .send(begun.answer.body);
        return;
      case 'in-flight':
        throw new HttpError(
          ErrorCode.IDEMPOTENCY_IN_FLIGHT,
          'A request with this Idempotency-Key is still being processed: retry in a moment.',
          { headers: { 'Retry-After': '1' } },
        );
      case 'mismatch':
        throw new HttpError(
          ErrorCode.IDEMPOTENCY_MISMATCH,
          'This Idempotency-Key was used with another request (a different body, or another route): use a new key for a new request.',
        );
    }
  };
}

async function settleIdempotency(
  app: FastifyInstance,
  request: FastifyRequest,
  answer: StoredAnswer,
): Promise<void> {
  const claim = request.idempotency;
  if (!claim) return;
  claim.settled = true;
  // Bounded like every Redis call of a request: the answer (a 202) does not wait out a failover. The
  // store keeps sending it until it lands.
  await app
    .withRedisTimeout(app.idempotency.complete(claim.scope, claim.key, claim.fingerprint, answer))
    .catch((error: unknown) => {
      // The notifications are in Redis and their ids derive from the key: a retry cannot deliver twice.
      request.log.warn(
        { err: error },
        'could not store the idempotent answer yet; sent again until it lands',
      );
    });
}

/**
 * App hook: a claimed key whose request was refused or failed (400, 429, 503…) is released, so the
 * client may retry with it. On `onSend`, which runs when the request's work has ended whether or not
 * its client is still there: `onResponse` never runs for a request whose client gave up (timed out,
 * closed the connection) before the answer, and its key stayed "in flight" for
 * HERALD_IDEMPOTENCY_IN_FLIGHT_MS, every retry meanwhile a 409. Not awaited: the answer does not wait
 * for the release (which is sent again until it lands, see `IdempotencyStore.abandon`).
 */
function registerIdempotencyRelease(app: FastifyInstance): void {
  // Callback style: it runs on every answer of the app, and most have no claim.
  app.addHook('onSend', (request, _reply, payload, done) => {
    const claim = request.idempotency;
    if (!claim || claim.settled) {
      done(null, payload);
      return;
    }
    claim.settled = true;
    app.idempotency.abandon(claim.scope, claim.key, claim.owner).catch((error: unknown) => {
      request.log.warn(
        { err: error },
        'could not release an idempotency key yet; sent again until Redis answers (at the latest it frees itself after HERALD_IDEMPOTENCY_IN_FLIGHT_MS)',
      );
    });
    done(null, payload);
  });
}

/** The notification ids of a stored answer: `{ id }` (a send) or `{ results: [{ id? }] }` (a batch). */
function idsOf(body: unknown): string[] {
  const answer = body as { id?: unknown; results?: { id?: unknown }[] } | undefined;
  if (typeof answer?.id === 'string') return [answer.id];
  const results = Array.isArray(answer?.results) ? answer.results : [];
  return results.map((result) => result?.id).filter((id): id is string => typeof id === 'string');
}
