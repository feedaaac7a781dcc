import { everySecond } from '@herald/config';
import type { AdminSnapshot } from '@herald/protocol';

/** Who receives each second's snapshot. */
export type SnapshotListener = (snapshot: AdminSnapshot) => void;

/**
 * The snapshots pushed by `GET /admin/stream`: while at least one listener is subscribed, one
 * snapshot is read per second (250 ms after the second ends, once the instances' flushes of 50 ms
 * after it are in) and sent to every listener of this gateway, however many dashboards are open. With
 * no listener, nothing is read.
 */
export class SnapshotStream {
  readonly #read: () => Promise<AdminSnapshot>;
  readonly #onError: (error: unknown) => void;
  readonly #listeners = new Set<SnapshotListener>();
  #ticker: { stop(): void } | undefined;
  #reading = false;

  constructor(read: () => Promise<AdminSnapshot>, onError: (error: unknown) => void) {
    this.#read = read;
    this.#onError = onError;
  }

  /** Adds `listener`; answers the function that removes it. */
  subscribe(listener: SnapshotListener): () => void {
    this.#listeners.add(listener);
    this.#ticker ??= everySecond(() => this.#tick(), 250);
    return () => {
      this.#listeners.delete(listener);
      if (this.#listeners.size === 0) this.close();
    };
  }

  /** How many listeners are subscribed. */
  get size(): number {
    return this.#listeners.size;
  }

  /** Stops reading (listeners are left to their own close). */
  close(): void {
    this.#ticker?.stop();
    this.#ticker = undefined;
  }

  #tick(): void {
    // A read slower than a second (Redis stalled) is not stacked on: that second is skipped.
    if (this.#reading) return;
    this.#reading = true;
    this.#read()
      .then(
        (snapshot) => {
          for (const listener of this.#listeners) listener(snapshot);
        },
        (error: unknown) => this.#onError(error),
      )
      .finally(() => {
        this.#reading = false;
      });
  }
}
