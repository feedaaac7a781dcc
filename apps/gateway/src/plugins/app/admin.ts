import { timingSafeEqual } from 'node:crypto';
import { everySecond, statsKeys } from '@herald/config';
import type { AdminSnapshot } from '@herald/protocol';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { readSnapshot } from '../../admin/snapshot.js';
import { SnapshotStream } from '../../admin/stream.js';
import { TrafficTally } from '../../admin/traffic.js';
import { sha256Buffer } from '../../api-keys.js';
import { ErrorCode, HttpError } from '../../errors.js';
import { RECIPIENT_POLICY, SENDER_POLICY } from '../../limits.js';
import { bearerToken, noBearer } from './api-keys.js';

type OnRequest = (request: FastifyRequest, reply: FastifyReply, done: (error?: Error) => void) => void;

declare module 'fastify' {
  interface FastifyInstance {
    /** This gateway's rate-limit decisions of the current second (the limiters' `onDecision`). */
    traffic: TrafficTally;
    /** Route `onRequest` hook of the admin API: `Authorization: Bearer <HERALD_ADMIN_KEY>`, else 401 (404 when off). */
    authenticateAdmin: OnRequest;
    /** Reads what the dashboard shows, from Redis. */
    adminSnapshot(): Promise<AdminSnapshot>;
    /** The snapshots `GET /admin/stream` pushes, one read per second for all listeners. */
    adminStream: SnapshotStream;
  }
}

/**
 * The operator's side of the gateway: the per-second tally of rate-limit decisions, written to Redis
 * once per second (50 ms after each second: one MULTI, never a write per request), the admin key
 * check, and the snapshot reads behind `/admin/*`. Registered before `limits`, whose limiters report
 * every decision to the tally.
 */
export default fp(
  async (app: FastifyInstance) => {
    const { config } = app;
    const keys = statsKeys(config.keyPrefix, config.deployment.name);
    const traffic = new TrafficTally();
    app.decorate('traffic', traffic);

    const flush = (second: number) => {
      const multi = app.redis.multi();
      if (!traffic.write(multi, keys, second)) return;
      multi.exec().catch((error: unknown) => app.log.debug({ err: error }, 'stats flush failed'));
    };
    // Seconds of Redis's clock: every instance adds into the same second's key.
    const flusher = everySecond(flush, 50, () => app.clock.now());
    app.addHook('preClose', async () => {
      flusher.stop();
      // What this second counted so far, before the connection closes.
      flush(Math.floor(app.clock.now() / 1000));
    });

    const snapshot = () =>
      app.withRedisTimeout(
        readSnapshot(
          {
            redis: app.redis,
            queues: [...app.queues, ...app.earlierQueues()],
            keys,
            peekRecipient: async (recipient) => {
              // `<tenant>/<user>`: the tenant's limiter (on Cluster its keys carry the tenant's tag).
              const tenantId = recipient.slice(0, recipient.indexOf('/'));
              const state = await app.limits
                .forTenant(tenantId)
                .peek({ [SENDER_POLICY]: '-', [RECIPIENT_POLICY]: recipient });
              return state.policies.find((policy) => policy.policy === RECIPIENT_POLICY);
            },
          },
          app.clock.now(),
        ),
      );
    app.decorate('adminSnapshot', snapshot);
    const stream = new SnapshotStream(snapshot, (error) =>
      app.log.warn({ err: error }, 'admin stream: snapshot read failed; next second retries'),
    );
    app.decorate('adminStream', stream);
    app.addHook('onClose', async () => stream.close());

    app.decorate('authenticateAdmin', adminAuth(config.adminKey));
    if (config.adminKey === undefined) {
      app.log.info(
        'admin API off: set HERALD_ADMIN_KEY (32+ random bytes) to turn on /admin/* and the dashboard',
      );
    }
  },
  { name: 'admin', dependencies: ['config', 'redis', 'queue'], fastify: '5.x' },
);

/** The admin key check: the one operator key, compared in constant time; tenant API keys never pass. */
function adminAuth(adminKey: string | undefined): OnRequest {
  const expected = adminKey === undefined ? undefined : sha256Buffer(adminKey);
  const challenge = { headers: { 'WWW-Authenticate': 'Bearer realm="herald-admin"' } };
  return (request, _reply, done) => {
    if (expected === undefined) {
      done(
        new HttpError(
          ErrorCode.ADMIN_DISABLED,
          'The admin API is off: set HERALD_ADMIN_KEY (32+ random bytes) on the gateway to turn it on.',
        ),
      );
      return;
    }
    const token = bearerToken(request);
    if (token === undefined) {
      done(
        new HttpError(
          ErrorCode.UNAUTHORIZED,
          noBearer(request, '<HERALD_ADMIN_KEY>', 'admin key'),
          challenge,
        ),
      );
      return;
    }
    if (!timingSafeEqual(sha256Buffer(token), expected)) {
      done(
        new HttpError(
          ErrorCode.UNAUTHORIZED,
          'Not the admin key: the admin API takes HERALD_ADMIN_KEY, never a tenant API key.',
          challenge,
        ),
      );
      return;
    }
    done();
  };
}
