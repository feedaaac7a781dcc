import { connect, type Socket } from 'node:net';
import { waitFor } from '@herald/testing';

/** An HTTP/1.1 answer read off a raw socket. */
export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** The whole text received. */
  raw: string;
}

/** Parses the first HTTP answer in `text` (Content-Length bodies only, which is all the gateway sends). */
export function parseAnswer(text: string): RawAnswer | undefined {
  const end = text.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const [statusLine = '', ...lines] = text.slice(0, end).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const length = Number(headers['content-length'] ?? 0);
  const body = Buffer.from(text.slice(end + 4))
    .subarray(0, length)
    .toString();
  return { status: Number(statusLine.split(' ')[1]), headers, body, raw: text };
}

/** Opens a connection to `port` on 127.0.0.1. */
export function open(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => resolve(socket));
    socket.once('error', reject);
  });
}

/** Sends `bytes` as they are and resolves with everything received until the server closes. */
export async function exchange(
  port: number,
  bytes: string | Buffer,
): Promise<{ text: string; answer: RawAnswer }> {
  const socket = await open(port);
  const received: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => received.push(chunk));
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.on('error', () => {});
  socket.write(bytes);
  // One request only: half-close, so that a keep-alive server closes once it has answered.
  socket.end();
  await closed;
  const text = Buffer.concat(received).toString();
  const answer = parseAnswer(text);
  if (!answer) throw new Error(`no HTTP answer in ${JSON.stringify(text)}`);
  return { text, answer };
}

/**
 * Sends `bytes` without half-closing (a client that would keep the connection) and, every 500 ms,
 * `drip` when given; resolves with the answer once the server has closed the connection itself.
 */
export async function answerBeforeClose(
  port: number,
  bytes: string,
  options: { drip?: string; timeoutMs: number; what: string },
): Promise<RawAnswer | undefined> {
  const socket = await open(port);
  const received: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => received.push(chunk));
  socket.on('error', () => {});
  let closed = false;
  socket.once('close', () => {
    closed = true;
  });
  socket.write(bytes);
  const { drip } = options;
  const dripping =
    drip === undefined ? undefined : setInterval(() => socket.writable && socket.write(drip), 500);
  try {
    await waitFor(() => closed, { timeoutMs: options.timeoutMs, what: options.what });
  } finally {
    clearInterval(dripping);
  }
  return parseAnswer(Buffer.concat(received).toString());
}

/**
 * Sends `head`, then body bytes as fast as the server takes them, until the server closes the
 * connection or `offerBytes` are sent. Resolves with the answer and how many body bytes the kernel
 * accepted (an upper bound of what the server read).
 */
export async function floodBody(
  port: number,
  head: string,
  offerBytes: number,
  chunk: (bytes: Buffer) => Buffer = (bytes) => bytes,
): Promise<{ answer: RawAnswer | undefined; bodyBytesSent: number; closedByServer: boolean }> {
  const socket = await open(port);
  const received: Buffer[] = [];
  let closed = false;
  socket.on('data', (data: Buffer) => received.push(data));
  socket.on('error', () => {});
  const done = new Promise<void>((resolve) =>
    socket.once('close', () => {
      closed = true;
      resolve();
    }),
  );
  socket.write(head);
  const block = chunk(Buffer.alloc(64 * 1024, 'a'));
  let sent = 0;
  while (!closed && sent < offerBytes) {
    const more = socket.write(block);
    sent += block.length;
    if (!more) {
      await Promise.race([new Promise((resolve) => socket.once('drain', resolve)), done]);
    }
  }
  const closedByServer = closed;
  socket.destroy();
  await done;
  return {
    answer: parseAnswer(Buffer.concat(received).toString()),
    // What the kernel took: the writes still queued in this process never left it.
    bodyBytesSent: Math.max(0, socket.bytesWritten - Buffer.byteLength(head)),
    closedByServer,
  };
}
