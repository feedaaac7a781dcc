// The peers: a bare Socket.IO 4.8 server, WebSocket only, with the same /healthz?gc=1 as Herald's realtime
// server. Started by run.ts with --expose-gc. Without BARE_REDIS_URL (the memory peer): no auth, no rooms,
// no adapter. With BARE_REDIS_URL (the delivery peer): `@socket.io/redis-adapter` on BARE_PUBSUB_KEY, each
// socket in the room `user:default/<auth.userId>`, so that a `@socket.io/redis-emitter` publish reaches it.
import { createServer } from 'node:http';
import { createAdapter } from '@socket.io/redis-adapter';
import { Redis } from 'ioredis';
import { Server } from 'socket.io';

const http = createServer((request, response) => {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (request.url?.includes('gc=1') && gc) gc();
  const memory = process.memoryUsage();
  response.writeHead(200, { 'content-type': 'application/json' });
  response.end(
    JSON.stringify({
      connections: server.engine.clientsCount,
      heapUsedBytes: memory.heapUsed,
      rssBytes: memory.rss,
    }),
  );
});
const redisUrl = process.env.BARE_REDIS_URL;
const pub = redisUrl ? new Redis(redisUrl) : undefined;
const server = new Server(http, {
  transports: ['websocket'],
  ...(pub
    ? { adapter: createAdapter(pub, pub.duplicate(), { key: process.env.BARE_PUBSUB_KEY ?? 'socket.io' }) }
    : {}),
});
if (pub) {
  server.on('connection', (socket) => {
    void socket.join(`user:default/${String(socket.handshake.auth.userId)}`);
  });
}
http.listen(0, '127.0.0.1', () => {
  const address = http.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  process.stdout.write(`${JSON.stringify({ msg: 'listening', port })}\n`);
});
process.on('SIGTERM', () => {
  void server.close();
  process.exit(0);
});
