/**
 * Sends the ids passed: `true` once they are on their way (`failed` puts them back if the server
 * refuses), `false` when they cannot go now (not connected): they wait for the next flush.
 */
export type SendAcks = (ids: string[], failed: (retryAfterMs?: number) => void) => boolean;

/** Acks of shown notifications (they feed delivery status and latency), sent in batches, each id once. */
export class AckQueue {
  readonly #queue = new Set<string>();
  readonly #acked = new Set<string>();
  readonly #send: SendAcks;
  readonly #delayMs: number;
  readonly #batch: number;
  #timer: ReturnType<typeof setTimeout> | undefined;

  /** Sends after `delayMs`, or at once when `batch` ids wait. */
  constructor(send: SendAcks, delayMs: number, batch: number) {
    this.#send = send;
    this.#delayMs = delayMs;
    this.#batch = batch;
  }

  add(ids: readonly string[]): void {
    for (const id of ids) if (!this.#acked.has(id)) this.#queue.add(id);
    if (this.#queue.size === 0) return;
    if (this.#queue.size >= this.#batch) this.flush();
    else this.#timer ??= setTimeout(() => this.flush(), this.#delayMs);
  }

  flush(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#queue.size === 0) return;
    const ids = [...this.#queue];
    const sent = this.#send(ids, (retryAfterMs) => {
      for (const id of ids) {
        this.#acked.delete(id);
        this.#queue.add(id);
      }
      this.#timer ??= setTimeout(() => this.flush(), retryAfterMs ?? 1000);
    });
    if (!sent) return;
    this.#queue.clear();
    for (const id of ids) this.#acked.add(id);
  }
}
