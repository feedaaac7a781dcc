import { type NotificationEvent, signUserToken } from '@herald/protocol';
import { io, type Socket } from 'socket.io-client';
import type { Shown } from './ledger.js';

/**
 * A real socket.io-client that records every notification it is shown and, when its connection drops,
 * reconnects with the offset of the last one, trying the realtime instances in turn (failover).
 */
export class ChaosClient {
  readonly shown: Shown[] = [];
  resyncs = 0;
  reconnects = 0;
  #socket: Socket | undefined;
  #instance: number;
  #closed = false;
  #lastOffset = '0-0';
  #synced = false;

  constructor(
    readonly userId: string,
    private readonly options: { realtimes: () => readonly string[]; secret: string; first: number },
  ) {
    this.#instance = options.first;
  }

  get synced(): boolean {
    return this.#synced;
  }

  connect(): void {
    if (this.#closed) return;
    this.#synced = false;
    const urls = this.options.realtimes();
    const url = urls[this.#instance % urls.length] ?? '';
    const socket = io(url, {
      auth: (callback) => {
        void signUserToken({
          tenantId: 'default',
          keyId: 'chaos',
          userId: this.userId,
          secret: this.options.secret,
          ttlSeconds: 3600,
        }).then(({ token }) => callback({ token, lastOffset: this.#lastOffset }));
      },
      transports: ['websocket'],
      reconnection: false,
      forceNew: true,
      timeout: 3000,
    });
    this.#socket = socket;
    socket.on('notification', (event: NotificationEvent) => {
      this.shown.push({ id: event.id, offset: event.offset, at: Date.now() });
      this.#lastOffset = event.offset;
    });
    socket.on('synced', () => {
      this.#synced = true;
    });
    socket.on('resync', () => {
      this.resyncs++;
    });
    const retry = () => {
      socket.removeAllListeners();
      socket.disconnect();
      if (this.#closed) return;
      this.reconnects++;
      this.#instance++;
      setTimeout(() => this.connect(), 100);
    };
    socket.once('connect_error', retry);
    socket.once('disconnect', retry);
  }

  close(): void {
    this.#closed = true;
    this.#socket?.removeAllListeners();
    this.#socket?.disconnect();
  }
}
