import WebSocket from 'ws';

/**
 * A hand-driven Engine.IO v4 / Socket.IO v5 client over one WebSocket (`ws`), for what
 * socket.io-client never does: drop the TCP connection right after the CONNECT packet, connect and
 * disconnect the namespace many times on one connection, or send events with no body.
 */
export class RawClient {
  readonly ws: WebSocket;
  /** Text frames from the server, Engine.IO pings answered and left out. */
  readonly frames: string[] = [];
  readonly #opened: Promise<void>;

  constructor(url: string) {
    this.ws = new WebSocket(`${url.replace(/^http/, 'ws')}/socket.io/?EIO=4&transport=websocket`);
    this.ws.on('error', () => {});
    this.#opened = new Promise<void>((resolve, reject) => {
      this.ws.once('error', reject);
      this.ws.once('close', () => reject(new Error('closed before the Engine.IO open packet')));
      this.ws.on('message', (data) => {
        const frame = String(data);
        if (frame === '2') {
          this.ws.send('3'); // ping → pong
          return;
        }
        if (frame.startsWith('0')) resolve();
        else this.frames.push(frame);
      });
    });
  }

  /** Resolves once the server's Engine.IO open packet (`0{sid,…}`) has arrived. */
  opened(): Promise<void> {
    return this.#opened;
  }

  /** Sends a Socket.IO packet (`40{…}` CONNECT, `41` DISCONNECT, `42[…]` EVENT); resolves once written. */
  send(packet: string): Promise<void> {
    return new Promise((resolve, reject) =>
      this.ws.send(packet, (error) => (error ? reject(error) : resolve())),
    );
  }

  /** Sends CONNECT with `auth` to the main namespace. */
  connect(auth: Record<string, unknown>): Promise<void> {
    return this.send(`40${JSON.stringify(auth)}`);
  }

  /** Destroys the TCP socket at once: no WebSocket close frame, no Socket.IO DISCONNECT. */
  drop(): void {
    this.ws.terminate();
  }
}

/** Opens a connection, sends CONNECT with `auth` and drops the TCP socket as soon as it is written. */
export async function connectAndDrop(url: string, auth: Record<string, unknown>): Promise<void> {
  const client = new RawClient(url);
  await client.opened();
  await client.connect(auth);
  client.drop();
}
