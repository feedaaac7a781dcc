// The memory peer: a bare Socket.IO 4.8 server (no auth, no rooms, no adapter), WebSocket only, with the
// same /healthz?gc=1 as Herald's realtime server. Started by run.ts with --expose-gc.
import { createServer } from 'node:http';
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
const server = new Server(http, { transports: ['websocket'] });
http.listen(0, '127.0.0.1', () => {
  const address = http.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  process.stdout.write(`${JSON.stringify({ msg: 'listening', port })}\n`);
});
process.on('SIGTERM', () => {
  void server.close();
  process.exit(0);
});
