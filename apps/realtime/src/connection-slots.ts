/**
 * Per-user connection slots of one realtime process. A slot is held by a *connected* socket only,
 * from its `connection` to its `disconnect` (which Socket.IO emits for every connected socket,
 * whatever closed it), so a handshake that never completes (the client dropped the TCP connection
 * after its CONNECT packet, or a later middleware refused it) never takes one.
 *
 * The handshake asks {@link ConnectionSlots.isFull} (the refusal is a `connect_error`); handshakes
 * checked at the same time can all pass it, so {@link ConnectionSlots.take} checks again when the
 * socket connects, and the caller closes a socket that found no free slot.
 */
export class ConnectionSlots {
  readonly #max: number;
  /** User key → ids of its connected sockets. */
  readonly #byUser = new Map<string, Set<string>>();

  constructor(maxPerUser: number) {
    this.#max = maxPerUser;
  }

  get maxPerUser(): number {
    return this.#max;
  }

  /** Connected sockets of `userKey`. */
  count(userKey: string): number {
    return this.#byUser.get(userKey)?.size ?? 0;
  }

  isFull(userKey: string): boolean {
    return this.count(userKey) >= this.#max;
  }

  /** Takes a slot for a socket that has just connected; false when every slot is taken. */
  take(userKey: string, socketId: string): boolean {
    let sockets = this.#byUser.get(userKey);
    if (sockets === undefined) {
      sockets = new Set();
      this.#byUser.set(userKey, sockets);
    }
    if (sockets.has(socketId)) return true;
    if (sockets.size >= this.#max) return false;
    sockets.add(socketId);
    return true;
  }

  /** Gives back the slot of `socketId`, if it holds one (idempotent). */
  release(userKey: string, socketId: string): void {
    const sockets = this.#byUser.get(userKey);
    if (sockets === undefined) return;
    sockets.delete(socketId);
    if (sockets.size === 0) this.#byUser.delete(userKey);
  }
}
