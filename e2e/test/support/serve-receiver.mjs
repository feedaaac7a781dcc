// What the receiver processes (webhook-receiver.mjs, push-receiver.mjs) share: listen on a free
// loopback port, say so in the `listening` line `startApp` waits for, and stop on SIGTERM.

/** @param {import('node:net').Server} server */
export function serveReceiver(server) {
  server.listen(0, '127.0.0.1', () => {
    process.stdout.write(`${JSON.stringify({ msg: 'listening', port: server.address().port })}\n`);
  });
  process.on('SIGTERM', () => {
    server.closeAllConnections();
    server.close(() => process.exit(0));
  });
}
