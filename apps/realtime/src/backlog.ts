import type { Socket } from 'socket.io';

/** Pages (`list` answers, replay and gap-fill reads) are read from the inbox only while less than this waits. */
export const ROOM_BYTES = 1024 * 1024;
/** A socket with more than this waiting for its client is disconnected (a client that does not read). */
export const SLOW_CLIENT_BYTES = 8 * 1024 * 1024;
/** How often a wait for room looks again, beside the transport's drain events. */
const ROOM_CHECK_MS = 250;

type Packet = { data?: unknown };
interface Transport {
  on(event: 'drain', listener: () => void): unknown;
  off(event: 'drain', listener: () => void): unknown;
  /** The `ws` WebSocket of the websocket transport (none for polling). */
  socket?: { bufferedAmount?: number; terminate?: () => void };
}

function sizeOf(packet: Packet): number {
  const data = packet.data;
  if (typeof data === 'string') return data.length;
  if (data instanceof ArrayBuffer || ArrayBuffer.isView(data)) return data.byteLength;
  return 0;
}

/**
 * What one socket was sent that its client has not read yet: the packets Engine.IO holds while its
 * transport is busy (its write buffer, counted as packets are created and flushed) and the bytes the
 * websocket has not handed to the kernel yet (`ws`'s bufferedAmount). Socket.IO has no back-pressure
 * of its own (socketio/socket.io#3158): an emit to a client that does not read is held in memory for as
 * long as the connection lives, so the realtime server asks this before it reads a page for a socket,
 * and disconnects a socket that holds too much (Centrifugo does the same with its client queue limit).
 * String lengths count UTF-16 units, a little below the bytes for non-ASCII text: a bound, not a meter.
 */
export class SocketBacklog {
  #queued = 0;
  #closed = false;
  /** The end of the chain of {@link turn}s. */
  #turns: Promise<unknown> = Promise.resolve();
  readonly #socket: Socket;

  constructor(socket: Socket, onCreate: (backlog: SocketBacklog) => void) {
    this.#socket = socket;
    const conn = socket.conn;
    conn.on('packetCreate', (packet: Packet) => {
      this.#queued += sizeOf(packet);
      onCreate(this);
    });
    conn.on('flush', (packets: Packet[]) => {
      for (const packet of packets) this.#queued -= sizeOf(packet);
    });
    conn.once('close', () => {
      this.#closed = true;
      this.#queued = 0;
    });
  }

  /** Bytes waiting for the client. */
  get bytes(): number {
    if (this.#closed) return 0;
    const buffered = this.#transport()?.socket?.bufferedAmount;
    return Math.max(0, this.#queued) + (typeof buffered === 'number' ? buffered : 0);
  }

  /** Resolves once less than {@link ROOM_BYTES} waits, or once the socket is closed (nothing to read for). */
  room(): Promise<void> {
    if (this.bytes < ROOM_BYTES) return Promise.resolve();
    return new Promise((resolve) => {
      const conn = this.#socket.conn;
      const transport = this.#transport();
      const check = () => {
        if (!this.#closed && this.bytes >= ROOM_BYTES) return;
        clearInterval(timer);
        transport?.off('drain', check);
        conn.off('drain', check);
        conn.off('close', check);
        resolve();
      };
      const timer = setInterval(check, ROOM_CHECK_MS);
      transport?.on('drain', check);
      conn.on('drain', check);
      conn.on('close', check);
    });
  }

  /**
   * Runs `work` (read a page and emit it) after the turns before it, once the socket has room: one page
   * at a time per socket, so that many asked at once are not all read before the first is sent.
   */
  turn(work: () => Promise<void>): Promise<void> {
    const next = this.#turns.then(() => this.room()).then(work);
    this.#turns = next.catch(() => undefined);
    return next;
  }

  /**
   * Closes the connection at once, without the goodbye it could not read: a websocket is terminated (a
   * close would wait for the data queued before it); polling is closed. The client sees a transport
   * close and reconnects with its lastOffset, as after any disconnect.
   */
  drop(): void {
    const socket = this.#transport()?.socket;
    if (typeof socket?.terminate === 'function') socket.terminate();
    else this.#socket.disconnect(true);
  }

  #transport(): Transport | undefined {
    return (this.#socket.conn as unknown as { transport?: Transport }).transport;
  }
}
