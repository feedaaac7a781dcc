import { createServer, type Server as HttpServer } from 'node:http';
import {
  checkWritable,
  connectionErrorLog,
  createRedis,
  DeploymentFingerprint,
  listenFailure,
  RedisClock,
  settleWithin,
} from '@herald/config';
import { Inbox, InboxError, isOffset, Preferences, type ReadSelection, Topics } from '@herald/inbox';
import { LiveSubscriber, livePublisher } from '@herald/live';
import {
  type ClientToServerEvents,
  type CommandReply,
  ErrorCode,
  type GoodbyeEvent,
  type ListReply,
  notificationIdOf,
  revokedApiKeysKey,
  type ServerToClientEvents,
  type SocketData,
  SocketEvent,
  TokenErrorCode,
  UserTokenError,
  verifyUserToken,
} from '@herald/protocol';
import type { Logger } from 'pino';
import { Server, type Socket } from 'socket.io';
import { AbuseLimits, RATE_LIMITED } from './abuse.js';
import { SLOW_CLIENT_BYTES, SocketBacklog } from './backlog.js';
import {
  answerCommand,
  answerUnknownEvents,
  commandArgs,
  isPlainBody,
  refuseExtraArguments,
  refuseOtherKeys,
  upToOf,
} from './command-args.js';
import type { RealtimeConfig } from './config.js';
import { ConnectionSlots } from './connection-slots.js';
import { Delivery } from './delivery.js';
import { createMetrics, httpHandler } from './http.js';
import { listPage } from './list.js';
import { listenToPreferences } from './preferences.js';
import { realtimePush } from './push.js';
import { checkRevocations } from './revocation.js';
import { listenToTopics } from './self-service-topics.js';
import { RealtimeStats } from './stats.js';
import { userKeyOf } from './user-key.js';
import { realtimeWebhookEvents } from './webhooks.js';

type HeraldServer = Server<ClientToServerEvents, ServerToClientEvents, Record<string, never>, SocketData>;
type HeraldSocket = Socket<ClientToServerEvents, ServerToClientEvents, Record<string, never>, SocketData>;

/** Stable codes of handshake refusals (`connect_error` `data.code`), besides the token codes. */
export const HandshakeErrorCode = {
  OFFSET_INVALID: ErrorCode.OFFSET_INVALID,
  TOO_MANY_CONNECTIONS: ErrorCode.TOO_MANY_CONNECTIONS,
  UNAVAILABLE: ErrorCode.UNAVAILABLE,
  RATE_LIMITED,
} as const;

/** A realtime server, built but not yet listening. */
export interface RealtimeServer {
  io: HeraldServer;
  http: HttpServer;
  /** Binds `config.port` on `config.host`; answers the port actually bound (useful with PORT=0). */
  listen(): Promise<number>;
  close(): Promise<void>;
}

// setTimeout's largest delay (~24.8 days); a token valid longer is checked again then.
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Longest a handshake waits for Redis's answer to its revocation check, ms; then it is refused
 * `HERALD_ERR_UNAVAILABLE` ("retry shortly"). The connection queues commands while Redis is away: during
 * an outage (a Cluster whose master is down answers nothing until it is back) a handshake hung until
 * Socket.IO's own 20 s connect timeout, with no code the client could tell the user.
 */
const HANDSHAKE_REDIS_MS = 2000;

/**
 * Builds the Socket.IO server (it listens on `listen()`): verifies the user token in the handshake,
 * subscribes to each connected user's live channel (`@herald/live`), replays the user's inbox after the
 * client's `lastOffset` and then delivers live notifications (from every worker) exactly once, in order;
 * takes acks and read marks.
 */
export function buildRealtime(config: RealtimeConfig, log: Logger): RealtimeServer {
  const target = { url: config.redisUrl, clusterNodes: config.redisClusterNodes };
  // Auto-pipelined: the acks, reads and replays of many sockets in one turn go in one write.
  const pub = createRedis(target, 'plain', { enableAutoPipelining: true });
  // Sharded pub/sub on Redis Cluster: each channel is served by its slot's node, which ioredis's
  // `shardedSubscribers` follows (one subscriber connection per shard). It follows a failover or a slot
  // migration only when it reads the slot table again, and a subscriber sends nothing that would meet a
  // MOVED: without a periodic read (ioredis has none by default) a planned failover (CLUSTER FAILOVER),
  // whose old master drops its slots' channels, left the users of those slots shown nothing live until
  // they reconnected. One CLUSTER SLOTS a second per instance.
  const sub =
    config.redisClusterNodes && config.pubsubMode === 'sharded'
      ? createRedis(target, 'plain', {}, { shardedSubscribers: true, slotsRefreshInterval: 1000 })
      : createRedis(target, 'plain');
  pub.on('error', connectionErrorLog(log, 'redis (pub) connection error'));
  sub.on('error', connectionErrorLog(log, 'redis (sub) connection error'));
  // Tokens are judged by Redis's clock, which the gateway mints them by (this machine's may be off).
  const clock = new RedisClock(pub);
  const inbox = new Inbox(pub, config.inbox);
  const preferences = new Preferences(pub, { prefix: inbox.prefix });
  const topics = new Topics(pub, { prefix: inbox.prefix });
  // First acks and reads are reported to the tenant's delivery webhook (if it has one), not awaited.
  const webhooks = realtimeWebhookEvents(config, pub, log, () => clock.now());
  const push = realtimePush(config, pub, log);
  const deliveries = new Map<string, Delivery>();
  const slots = new ConnectionSlots(config.maxConnectionsPerUser);
  const abuse = new AbuseLimits(config, config.abuse, log);
  const revokedKeys = revokedApiKeysKey(config.keyPrefix);

  // What each socket was sent and its client has not read yet (see backlog.ts).
  const backlogs = new Set<SocketBacklog>();
  const metrics = createMetrics(
    () => io.engine.clientsCount,
    () => {
      let bytes = 0;
      for (const backlog of backlogs) bytes += backlog.bytes;
      return bytes;
    },
  );
  const fingerprint = new DeploymentFingerprint(pub, {
    deployment: config.deployment.name,
    app: 'realtime',
    instanceId: config.instanceId,
    settings: config.deployment.settings,
  });
  fingerprint.start();
  const stats = new RealtimeStats(
    pub,
    config,
    () => io.engine.clientsCount,
    log,
    () => clock.now(),
  );
  const http = createServer(
    httpHandler({
      instanceId: config.instanceId,
      sockets: () => io.engine.clientsCount,
      redis: [pub, sub],
      writable: () => checkWritable(pub, config.queue),
      metrics,
      mismatches: () => fingerprint.mismatches(),
    }),
  );
  // Socket.IO is the connection to the browser only: what reaches a user's sockets on any instance goes
  // through the user's Herald live channel, not a Socket.IO adapter.
  const liveSettings = { key: config.pubsubKey, mode: config.pubsubMode };
  const live = livePublisher(pub, liveSettings, (error) => log.warn({ err: error }, 'live publish failed'));
  // After Redis comes back, messages published meanwhile are lost: every socket reads its inbox after
  // its last offset.
  const liveSub = new LiveSubscriber(sub, {
    ...liveSettings,
    onReconnect: () => {
      log.info({ sockets: deliveries.size }, 'redis back: filling gaps from the inbox');
      for (const delivery of deliveries.values()) delivery.fill();
    },
    onError: (error) => log.warn({ err: error }, 'live channel error'),
  });
  const io: HeraldServer = new Server(http, {
    cors: { origin: config.corsOrigin },
    transports: config.allowPolling ? ['polling', 'websocket'] : ['websocket'],
    pingInterval: config.pingIntervalMs,
    pingTimeout: config.pingTimeoutMs,
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
    const auth = (socket.handshake.auth ?? {}) as Record<string, unknown>;
    // null is absent (clients of other languages send an optional field they leave out so): live from now.
    if (auth.lastOffset === null) delete auth.lastOffset;
    const { token, lastOffset } = auth;
    if (lastOffset !== undefined && !isOffset(lastOffset)) {
      refuseUnauthenticated(
        HandshakeErrorCode.OFFSET_INVALID,
        'lastOffset is not an inbox offset: pass the `offset` of the last notification received, or leave it out.',
      );
      return;
    }
    verifyUserToken(token, config.jwtSecret, new Date(clock.now()))
      .then(async (claims) => {
        // A token minted by a key that was revoked since is refused (fail closed when Redis cannot say,
        // or takes longer than HANDSHAKE_REDIS_MS to say).
        const revoked = await settleWithin(
          pub.sismember(revokedKeys, claims.keyId).catch(() => undefined),
          HANDSHAKE_REDIS_MS,
          undefined,
        );
        return { claims, revoked };
      })
      .then(
        ({ claims: { userId, tenantId, keyId, expiresAt, topics }, revoked }) => {
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
          socket.data.topics = topics;
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
    socket.use(refuseExtraArguments);
    // A client that does not read what it is sent (a frozen tab, a dead network, or on purpose) holds it
    // in this process's memory: past SLOW_CLIENT_BYTES it is disconnected, and it resumes from its
    // lastOffset when it reconnects. Pages are read for it only while it has room (backlog.room()).
    let dropping = false;
    const backlog = new SocketBacklog(socket, (self) => {
      if (dropping || self.bytes <= SLOW_CLIENT_BYTES) return;
      dropping = true;
      log.warn(
        { userId, tenantId, socketId: socket.id, backlogBytes: self.bytes },
        'slow client disconnected: it did not read what it was sent',
      );
      metrics.slowClients.inc();
      setImmediate(() => self.drop());
    });
    backlogs.add(backlog);
    const lastOffset = (socket.handshake.auth as { lastOffset?: string }).lastOffset;
    const seen = stats.connection(lastOffset);
    const delivery = new Delivery(
      userId,
      userInbox,
      {
        notification: (event) => {
          metrics.delivered.inc();
          seen.notification(event);
          socket.emit(SocketEvent.NOTIFICATION, event);
        },
        synced: (event) => {
          seen.synced(event);
          socket.emit(SocketEvent.SYNCED, event);
        },
        resync: (event) => {
          seen.resync();
          socket.emit(SocketEvent.RESYNC, event);
        },
        room: () => backlog.room(),
      },
      { gapWaitMs: config.gapWaitMs, replayPage: config.replayPage },
      log,
    );
    deliveries.set(socket.id, delivery);
    // Subscribe first, then replay: whatever is published once Redis confirmed the subscription is held
    // by the Delivery, so nothing falls between the replay's last read and the first live event.
    const subscription = liveSub.subscribe(tenantId, userId, (message) => {
      if (message.kind === 'notification') delivery.live(message.event);
      else socket.emit(SocketEvent.UNREAD, message.unread);
    });
    const expiry = scheduleExpiry(socket);
    socket.on('disconnect', (reason) => {
      subscription.close();
      delivery.close();
      deliveries.delete(socket.id);
      backlogs.delete(backlog);
      clearTimeout(expiry.timer);
      slots.release(userKey, socket.id);
      log.debug({ userId, tenantId, socketId: socket.id, reason }, 'disconnected');
    });

    socket.on(SocketEvent.ACK, (...args) => {
      const [body, reply] = commandArgs(args);
      command(reply, async () => {
        const acked = await userInbox.acknowledge(userId, idsOf(body, SocketEvent.ACK), config.instanceId);
        // Only the acks the inbox recorded (this user's notifications, first acks): a sample is never
        // taken by another user's ack of an id they saw.
        stats.acked(acked.ids, acked.deliveredAtMs);
        webhooks.delivered(tenantId, userId, acked);
        push.acked(userInbox, userId, acked);
        return { changed: acked.ids.length };
      });
    });
    socket.on(SocketEvent.READ, (...args) => {
      const [body, reply] = commandArgs(args);
      command(reply, async () => markRead(userInbox, userId, { ids: idsOf(body, SocketEvent.READ) }));
    });
    socket.on(SocketEvent.READ_ALL, (...args) => {
      const [body, reply] = commandArgs(args);
      command(reply, async () => {
        const upTo = upToOf(body);
        return markRead(userInbox, userId, upTo === undefined ? { all: true } : { all: true, upTo });
      });
    });
    answerUnknownEvents(socket);

    push.attach(socket);
    socket.on(SocketEvent.LIST, (...args) => {
      const [body, reply] = commandArgs(args);
      // One page at a time per socket, each once the socket has room for it (see backlog.ts).
      if (typeof reply === 'function')
        void backlog.turn(() =>
          listPage(userInbox, userId, body, log).then(reply as (page: ListReply) => void),
        );
    });

    listenToPreferences(socket, preferences.tenant(tenantId), userId, log);
    listenToTopics(socket, topics.tenant(tenantId), userId, socket.data.topics, log);

    subscription.ready
      .then(() => delivery.start(lastOffset, () => userInbox.unread(userId)))
      .catch((error: unknown) => log.error({ err: error, userId }, 'could not start delivery'));
    log.debug({ userId, tenantId, socketId: socket.id, lastOffset }, 'connected');
  });

  async function markRead(userInbox: Inbox, userId: string, selection: ReadSelection) {
    const read = await userInbox.markRead(userId, selection);
    // Every tab of the user, on every instance (this one included), gets the new count and the ids read.
    if (read.changed > 0) live.unread(userInbox.tenantId, userId, { ...read.unread, read: read.ids });
    webhooks.read(userInbox.tenantId, userId, read);
    return { changed: read.changed, unread: read.unread };
  }

  const revocationTimer = checkRevocations({
    sockets: () => io.of('/').sockets.values(),
    redis: pub,
    revokedKeys,
    intervalMs: config.revocationCheckMs,
    revoked: (socket) =>
      goodbye(socket, {
        code: ErrorCode.TOKEN_REVOKED,
        message: 'The API key that minted this token was revoked: get a new token from your backend.',
        reconnect: false,
      }),
    log,
  });

  function command(
    reply: ((answer: CommandReply) => void) | undefined,
    run: () => Promise<{ changed: number; unread?: { count: number; version: number } }>,
  ): void {
    answerCommand([undefined, reply], async () => ({ ok: true, ...(await run()) }), log);
  }

  function scheduleExpiry(socket: HeraldSocket): { timer: NodeJS.Timeout } {
    const holder = { timer: undefined as unknown as NodeJS.Timeout };
    const arm = () => {
      const left = socket.data.expiresAtMs - clock.now();
      if (left > MAX_TIMER_MS) {
        holder.timer = setTimeout(arm, MAX_TIMER_MS);
        return;
      }
      holder.timer = setTimeout(
        () => {
          goodbye(socket, {
            code: ErrorCode.TOKEN_EXPIRED,
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

  return {
    io,
    http,
    async listen() {
      await clock.sync();
      clock.start();
      await new Promise<void>((resolve, reject) => {
        http.once('error', (error) => reject(listenFailure(error, config)));
        http.listen(config.port, config.host, () => resolve());
      });
      stats.start();
      const address = http.address();
      return typeof address === 'object' && address ? address.port : config.port;
    },
    async close() {
      clearInterval(revocationTimer);
      clock.stop();
      // Tell every client to reconnect (the load balancer sends it to another instance), then close:
      // first, since it needs no Redis. What does need Redis (the last counts, the queues) is given
      // REDIS_STOP_MS each: a frozen Redis held the goodbyes until the grace timer killed the process.
      for (const socket of io.of('/').sockets.values()) {
        goodbye(socket, {
          code: ErrorCode.SERVER_SHUTDOWN,
          message: 'This server is shutting down: reconnect (to any instance) with your lastOffset.',
          reconnect: true,
        });
      }
      await io.close();
      abuse.close();
      await Promise.all(
        [fingerprint.stop(), stats.stop(), webhooks.close(), push.close()].map((stopping) =>
          settleWithin(
            stopping.catch(() => undefined),
            REDIS_STOP_MS,
            undefined,
          ),
        ),
      );
      pub.disconnect();
      sub.disconnect();
    },
  };
}

/** Longest wait, on shutdown, for each step that needs Redis (a frozen one never answers). */
const REDIS_STOP_MS = 2000;

function tooManyConnections(max: number): string {
  return `This user already has ${max} connections to this server (the limit): close one, then retry.`;
}

function idsOf(body: unknown, event: string): string[] {
  const ids = (body as { ids?: unknown } | undefined)?.ids;
  if (!isPlainBody(body) || !Array.isArray(ids))
    throw new InboxError(ErrorCode.INBOX_INVALID_ARGUMENT, 'Expected { ids: string[] }');
  refuseOtherKeys(body, event, ['ids']);
  // Ids are UUIDs, read case-insensitively (notificationIdOf); anything else is the inbox's to refuse.
  return ids.map((id) => (typeof id === 'string' ? notificationIdOf(id) : id)) as string[];
}
