import { createServer, type Server as HttpServer } from 'node:http';
import { Inbox, InboxError, isOffset, MAX_PAGE, type ReadSelection } from '@herald/inbox';
import {
  type ClientToServerEvents,
  type CommandReply,
  type GoodbyeEvent,
  type ListReply,
  revokedApiKeysKey,
  type ServerToClientEvents,
  type SocketData,
  SocketEvent,
  TokenErrorCode,
  UserTokenError,
  userKey,
  userRoom,
  verifyUserToken,
} from '@herald/protocol';
import { createAdapter, createShardedAdapter } from '@socket.io/redis-adapter';
import { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import { Server, type Socket } from 'socket.io';
import { AbuseLimits, RATE_LIMITED } from './abuse.js';
import { commandArgs } from './command-args.js';
import type { RealtimeConfig } from './config.js';
import { ConnectionSlots } from './connection-slots.js';
import { Delivery } from './delivery.js';
import { createMetrics, httpHandler } from './http.js';
import { withNotificationHook } from './live-hook.js';
import { userKeyOf } from './user-key.js';

type HeraldServer = Server<ClientToServerEvents, ServerToClientEvents, Record<string, never>, SocketData>;
type HeraldSocket = Socket<ClientToServerEvents, ServerToClientEvents, Record<string, never>, SocketData>;

/** Stable codes of handshake refusals (`connect_error` `data.code`), besides the token codes. */
export const HandshakeErrorCode = {
  OFFSET_INVALID: 'HERALD_ERR_OFFSET_INVALID',
  TOO_MANY_CONNECTIONS: 'HERALD_ERR_TOO_MANY_CONNECTIONS',
  UNAVAILABLE: 'HERALD_ERR_UNAVAILABLE',
  RATE_LIMITED,
} as const;

/** A running realtime server. */
export interface RealtimeServer {
  io: HeraldServer;
  http: HttpServer;
  /** Port actually bound (useful with PORT=0). */
  port: number;
  close(): Promise<void>;
}

// setTimeout's largest delay (~24.8 days); a token valid longer is checked again then.
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Starts the Socket.IO server: verifies the user token in the handshake, joins each socket to its user's
 * room, replays the user's inbox after the client's `lastOffset` and then delivers live notifications
 * (from every worker, through the Redis adapter) exactly once, in order; takes acks and read marks.
 */
export async function startRealtime(config: RealtimeConfig, log: Logger): Promise<RealtimeServer> {
  const pub: Redis | Cluster = config.redisClusterNodes
    ? new Cluster(config.redisClusterNodes)
    : new Redis(config.redisUrl);
  // Sharded pub/sub on Redis Cluster: each channel is served by its slot's node, which ioredis's
  // `shardedSubscribers` follows (one subscriber connection per shard).
  const sub =
    config.redisClusterNodes && config.pubsubMode === 'sharded'
      ? new Cluster(config.redisClusterNodes, { shardedSubscribers: true })
      : pub.duplicate();
  pub.on('error', (error) => log.warn({ err: error }, 'redis (pub) connection error'));
  sub.on('error', (error) => log.warn({ err: error }, 'redis (sub) connection error'));
  const inbox = new Inbox(pub, config.inbox);
  const deliveries = new Map<string, Delivery>();
  const slots = new ConnectionSlots(config.maxConnectionsPerUser);
  const abuse = new AbuseLimits(config, config.abuse, log);
  const revokedKeys = revokedApiKeysKey(config.keyPrefix);

  const metrics = createMetrics(() => io.engine.clientsCount);
  const http = createServer(
    httpHandler({
      instanceId: config.instanceId,
      sockets: () => io.engine.clientsCount,
      redis: [pub, sub],
      metrics,
    }),
  );
  const baseAdapter =
    config.pubsubMode === 'sharded'
      ? createShardedAdapter(pub, sub, { channelPrefix: config.pubsubKey, subscriptionMode: 'dynamic' })
      : createAdapter(pub, sub, { key: config.pubsubKey });
  const io: HeraldServer = new Server(http, {
    adapter: withNotificationHook(baseAdapter as (nsp: unknown) => unknown, (socket, event) =>
      deliveries.get(socket.id)?.live(event),
    ) as unknown as typeof baseAdapter,
    cors: { origin: config.corsOrigin },
    transports: config.allowPolling ? ['polling', 'websocket'] : ['websocket'],
    pingInterval: config.pingIntervalMs,
    pingTimeout: config.pingTimeoutMs,
  });

  // After Redis comes back, pub/sub messages published meanwhile are lost: every socket reads its
  // inbox after its last offset. The PING goes after the re-subscriptions on the same connection, so
  // once it answers, anything published later arrives live.
  let subWasReady = false;
  sub.on('ready', () => {
    if (!subWasReady) {
      subWasReady = true;
      return;
    }
    sub.ping().then(
      () => {
        log.info({ sockets: deliveries.size }, 'redis back: filling gaps from the inbox');
        for (const delivery of deliveries.values()) delivery.fill();
      },
      (error: unknown) => log.warn({ err: error }, 'redis ping after reconnect failed'),
    );
  });

  // Handshake: a refusal reaches the client as `connect_error` with a message and a stable `data.code`.
  io.use((socket, next) => {
    const refuse = (code: string, message: string, extra: { retryAfterMs?: number } = {}) => {
      const refusal = new Error(message) as Error & { data: { code: string; retryAfterMs?: number } };
      refusal.data = { code, ...extra };
      log.info({ code }, 'handshake refused');
      metrics.handshakesRefused.inc({ code });
      next(refusal);
    };
    // A refused handshake (no or bad token, bad lastOffset) counts against its client address; over the
    // limit it is answered HERALD_ERR_RATE_LIMITED, and so is every handshake from there for a while.
    const address = abuse.clientAddress(socket.request, socket.handshake.address);
    const limited = abuse.handshakeDenied(address);
    if (limited) {
      refuse(RATE_LIMITED, limited.error, { retryAfterMs: limited.retryAfterMs });
      return;
    }
    const refuseUnauthenticated = (code: string, message: string) => {
      abuse.refusedHandshake(address).then(
        (over) =>
          over
            ? refuse(RATE_LIMITED, over.error, { retryAfterMs: over.retryAfterMs })
            : refuse(code, message),
        () => refuse(code, message),
      );
    };
    const { token, lastOffset } = (socket.handshake.auth ?? {}) as Record<string, unknown>;
    if (lastOffset !== undefined && !isOffset(lastOffset)) {
      refuseUnauthenticated(
        HandshakeErrorCode.OFFSET_INVALID,
        'lastOffset is not an inbox offset: pass the `offset` of the last notification received, or leave it out.',
      );
      return;
    }
    verifyUserToken(token, config.jwtSecret)
      .then(async (claims) => {
        // A token minted by a key that was revoked since is refused (fail closed when Redis cannot say).
        const revoked = await pub.sismember(revokedKeys, claims.keyId).catch(() => undefined);
        return { claims, revoked };
      })
      .then(
        ({ claims: { userId, tenantId, keyId, expiresAt }, revoked }) => {
          if (revoked === undefined) {
            refuse(HandshakeErrorCode.UNAVAILABLE, 'Redis unavailable: retry shortly.');
            return;
          }
          if (revoked === 1) {
            refuseUnauthenticated(
              TokenErrorCode.REVOKED,
              'The API key that minted this token was revoked: get a new token from your backend.',
            );
            return;
          }
          // A slot is taken on `connection`, not here: a handshake that never completes takes none.
          if (slots.isFull(userKeyOf({ tenantId, userId }))) {
            refuse(HandshakeErrorCode.TOO_MANY_CONNECTIONS, tooManyConnections(slots.maxPerUser));
            return;
          }
          socket.data.userId = userId;
          socket.data.tenantId = tenantId;
          socket.data.keyId = keyId;
          socket.data.expiresAtMs = expiresAt.getTime();
          next();
        },
        (error: unknown) => {
          if (error instanceof UserTokenError) refuseUnauthenticated(error.code, error.message);
          else
            refuseUnauthenticated(
              TokenErrorCode.INVALID,
              'Token check failed: get a new one from POST /tokens.',
            );
        },
      );
  });

  io.on('connection', (socket: HeraldSocket) => {
    const { userId, tenantId } = socket.data;
    const userKey = userKeyOf(socket.data);
    // Everything this socket reads or writes is its tenant's: another tenant's `alice` is another user.
    const userInbox = inbox.tenant(tenantId);
    if (!slots.take(userKey, socket.id)) {
      // Handshakes checked at the same moment all saw a free slot; this one came too late.
      goodbye(socket, {
        code: HandshakeErrorCode.TOO_MANY_CONNECTIONS,
        message: tooManyConnections(slots.maxPerUser),
        reconnect: false,
      });
      return;
    }
    socket.use(abuse.events(userKey, socket.id));
    const delivery = new Delivery(
      userId,
      userInbox,
      {
        notification: (event) => {
          metrics.delivered.inc();
          socket.emit(SocketEvent.NOTIFICATION, event);
        },
        synced: (event) => socket.emit(SocketEvent.SYNCED, event),
        resync: (event) => socket.emit(SocketEvent.RESYNC, event),
      },
      { gapWaitMs: config.gapWaitMs, replayPage: config.replayPage },
      log,
    );
    deliveries.set(socket.id, delivery);
    const expiry = scheduleExpiry(socket);
    socket.on('disconnect', (reason) => {
      delivery.close();
      deliveries.delete(socket.id);
      clearTimeout(expiry.timer);
      slots.release(userKey, socket.id);
      log.debug({ userId, tenantId, socketId: socket.id, reason }, 'disconnected');
    });

    socket.on(SocketEvent.ACK, (...args) => {
      const [body, reply] = commandArgs(args);
      command(reply, async () => ({
        changed: await userInbox.ack(userId, idsOf(body), config.instanceId),
      }));
    });
    socket.on(SocketEvent.READ, (...args) => {
      const [body, reply] = commandArgs(args);
      command(reply, async () => markRead(userInbox, userId, { ids: idsOf(body) }));
    });
    socket.on(SocketEvent.READ_ALL, (...args) => {
      const [body, reply] = commandArgs(args);
      const upTo = (body as { upTo?: unknown } | undefined)?.upTo;
      if (upTo !== undefined && !isOffset(upTo)) {
        command(reply, async () => {
          throw new InboxError('HERALD_ERR_INBOX_INVALID_OFFSET', 'upTo is not an offset');
        });
        return;
      }
      command(reply, () =>
        markRead(userInbox, userId, upTo === undefined ? { all: true } : { all: true, upTo }),
      );
    });

    socket.on(SocketEvent.LIST, (...args) => {
      const [body, reply] = commandArgs(args);
      if (typeof reply !== 'function') return;
      const answer = reply as unknown as (answer: ListReply) => void;
      const { after, limit = 50 } = (body ?? {}) as { after?: unknown; limit?: unknown };
      if (after !== undefined && !isOffset(after)) {
        answer({ ok: false, code: 'HERALD_ERR_INBOX_INVALID_OFFSET', error: 'after is not an offset' });
        return;
      }
      if (!Number.isInteger(limit) || (limit as number) < 1 || (limit as number) > MAX_PAGE) {
        answer({
          ok: false,
          code: 'HERALD_ERR_INBOX_INVALID_ARGUMENT',
          error: `limit must be an integer from 1 to ${MAX_PAGE}`,
        });
        return;
      }
      userInbox.list(userId, { after, limit: limit as number }).then(
        (page) => answer({ ok: true, ...page }),
        (error: unknown) => {
          log.warn({ err: error }, 'list failed');
          answer({ ok: false, code: 'HERALD_ERR_UNAVAILABLE', error: 'Redis unavailable: retry shortly.' });
        },
      );
    });

    // Join first, then replay: whatever is published from now on is held by the Delivery, so nothing
    // falls between the replay's last read and the first live event. On the sharded adapter the join
    // subscribes to the room's channel; the PING on the same connection confirms it took effect.
    const lastOffset = (socket.handshake.auth as { lastOffset?: string }).lastOffset;
    Promise.resolve(socket.join(userRoom(tenantId, userId)))
      .then(() => (config.pubsubMode === 'sharded' ? sub.ping() : undefined))
      .then(() => delivery.start(lastOffset, () => userInbox.unread(userId)))
      .then(() => {
        // Sharded pub/sub on Cluster: the room's SSUBSCRIBE goes to its shard's node, which the PING
        // above may not reach; one more inbox read a second later covers that window.
        if (config.pubsubMode === 'sharded' && config.redisClusterNodes)
          setTimeout(() => delivery.fill(), 1000);
      })
      .catch((error: unknown) => log.error({ err: error, userId }, 'could not start delivery'));
    log.debug({ userId, tenantId, socketId: socket.id, lastOffset }, 'connected');
  });

  async function markRead(userInbox: Inbox, userId: string, selection: ReadSelection) {
    const result = await userInbox.markRead(userId, selection);
    // Every tab of the user, on every instance, gets the new count.
    if (result.changed > 0) {
      io.to(userRoom(userInbox.tenantId, userId)).emit(SocketEvent.UNREAD, result.unread);
    }
    return result;
  }

  // Revoked API keys: every `revocationCheckMs`, the distinct keys behind this instance's sockets are
  // checked in one SMISMEMBER; a revoked key's sockets get `goodbye` and are disconnected. A revoked
  // key's live sockets are therefore gone within `revocationCheckMs` (+ one Redis round trip).
  const revocationTimer = setInterval(() => {
    const byKey = new Map<string, HeraldSocket[]>();
    for (const socket of io.of('/').sockets.values()) {
      const keyId = socket.data.keyId;
      if (keyId === undefined) continue;
      const sockets = byKey.get(keyId);
      if (sockets) sockets.push(socket);
      else byKey.set(keyId, [socket]);
    }
    if (byKey.size === 0) return;
    const keyIds = [...byKey.keys()];
    pub.smismember(revokedKeys, ...keyIds).then(
      (flags) => {
        flags.forEach((flag, index) => {
          if (flag !== 1) return;
          for (const socket of byKey.get(keyIds[index] as string) ?? []) {
            goodbye(socket, {
              code: 'HERALD_ERR_TOKEN_REVOKED',
              message: 'The API key that minted this token was revoked: get a new token from your backend.',
              reconnect: false,
            });
          }
        });
      },
      (error: unknown) => log.warn({ err: error }, 'revocation check failed; retrying'),
    );
  }, config.revocationCheckMs);
  revocationTimer.unref();

  function command(
    reply: ((answer: CommandReply) => void) | undefined,
    run: () => Promise<{ changed: number; unread?: { count: number; version: number } }>,
  ): void {
    const answer = typeof reply === 'function' ? reply : () => {};
    run().then(
      (result) => answer({ ok: true, ...result }),
      (error: unknown) => {
        if (error instanceof InboxError) {
          answer({ ok: false, code: error.code, error: error.message });
        } else {
          log.warn({ err: error }, 'command failed');
          answer({ ok: false, code: 'HERALD_ERR_UNAVAILABLE', error: 'Redis unavailable: retry shortly.' });
        }
      },
    );
  }

  function scheduleExpiry(socket: HeraldSocket): { timer: NodeJS.Timeout } {
    const holder = { timer: undefined as unknown as NodeJS.Timeout };
    const arm = () => {
      const left = socket.data.expiresAtMs - Date.now();
      if (left > MAX_TIMER_MS) {
        holder.timer = setTimeout(arm, MAX_TIMER_MS);
        return;
      }
      holder.timer = setTimeout(
        () => {
          goodbye(socket, {
            code: 'HERALD_ERR_TOKEN_EXPIRED',
            message: 'Token expired: get a new one from POST /tokens, then reconnect with your lastOffset.',
            reconnect: false,
          });
        },
        Math.max(0, left),
      );
    };
    arm();
    return holder;
  }

  function goodbye(socket: HeraldSocket, event: GoodbyeEvent): void {
    socket.emit(SocketEvent.GOODBYE, event);
    socket.disconnect(true);
  }

  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(config.port, config.host, () => resolve());
  });
  const address = http.address();
  const port = typeof address === 'object' && address ? address.port : config.port;

  return {
    io,
    http,
    port,
    async close() {
      clearInterval(revocationTimer);
      // Tell every client to reconnect (the load balancer sends it to another instance), then close.
      for (const socket of io.of('/').sockets.values()) {
        goodbye(socket, {
          code: 'HERALD_SERVER_SHUTDOWN',
          message: 'This server is shutting down: reconnect (to any instance) with your lastOffset.',
          reconnect: true,
        });
      }
      await io.close();
      abuse.close();
      pub.disconnect();
      sub.disconnect();
    },
  };
}

function tooManyConnections(max: number): string {
  return `This user already has ${max} connections to this server (the limit): close one, then retry.`;
}

function idsOf(body: unknown): string[] {
  const ids = (body as { ids?: unknown } | undefined)?.ids;
  if (!Array.isArray(ids))
    throw new InboxError('HERALD_ERR_INBOX_INVALID_ARGUMENT', 'Expected { ids: string[] }');
  return ids as string[];
}
