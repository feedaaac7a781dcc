import { createServer, type Server as HttpServer } from 'node:http';
import {
  type ClientToServerEvents,
  type ServerToClientEvents,
  type SocketData,
  UserTokenError,
  userRoom,
  verifyUserToken,
} from '@herald/protocol';
import { createAdapter } from '@socket.io/redis-adapter';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { Server } from 'socket.io';
import type { RealtimeConfig } from './config.js';

/** A running realtime server. */
export interface RealtimeServer {
  io: Server<ClientToServerEvents, ServerToClientEvents, Record<string, never>, SocketData>;
  http: HttpServer;
  /** Port actually bound (useful with PORT=0). */
  port: number;
  close(): Promise<void>;
}

/**
 * Starts the Socket.IO server: verifies the user token in the handshake, puts each socket in its
 * user's room, and receives events for those rooms from every worker through the Redis adapter.
 */
export async function startRealtime(config: RealtimeConfig, log: Logger): Promise<RealtimeServer> {
  const pub = new Redis(config.redisUrl);
  const sub = pub.duplicate();
  pub.on('error', (error) => log.warn({ err: error }, 'redis (pub) connection error'));
  sub.on('error', (error) => log.warn({ err: error }, 'redis (sub) connection error'));

  const http = createServer((_request, response) => {
    response.writeHead(404, { 'content-type': 'application/json' });
    response.end(
      JSON.stringify({
        error: 'Not found: connect with Socket.IO at /socket.io/',
        code: 'HERALD_ERR_NOT_FOUND',
      }),
    );
  });
  const io = new Server<ClientToServerEvents, ServerToClientEvents, Record<string, never>, SocketData>(http, {
    adapter: createAdapter(pub, sub, { key: config.pubsubKey }),
    cors: { origin: config.corsOrigin },
  });

  // Handshake auth: a refused token reaches the client as `connect_error` with a message and a code.
  io.use((socket, next) => {
    verifyUserToken(socket.handshake.auth.token, config.jwtSecret).then(
      ({ userId }) => {
        socket.data.userId = userId;
        next();
      },
      (error: unknown) => {
        const refusal = new Error(
          error instanceof UserTokenError ? error.message : 'Token check failed',
        ) as Error & {
          data: { code: string };
        };
        refusal.data = { code: error instanceof UserTokenError ? error.code : 'HERALD_ERR_TOKEN_INVALID' };
        log.info({ code: refusal.data.code }, 'handshake refused');
        next(refusal);
      },
    );
  });

  io.on('connection', (socket) => {
    const { userId } = socket.data;
    void socket.join(userRoom(userId));
    log.debug({ userId, socketId: socket.id }, 'connected');
  });

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
      // Closing io disconnects every socket; clients reconnect to another instance.
      await io.close();
      pub.disconnect();
      sub.disconnect();
    },
  };
}
