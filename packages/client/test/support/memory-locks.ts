import type { LockManagerLike } from '../../src/index.js';

interface Waiter {
  callback: (lock: unknown) => Promise<unknown>;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/**
 * Web Locks (exclusive mode, `signal`, `steal`) in memory, for Node 20 which has no `navigator.locks`:
 * the clients of one test process play the tabs of one browser profile. It follows the spec's
 * observable behaviour: a granted callback holds the lock until its promise settles; a waiting request
 * is aborted by its signal (AbortError); `steal` takes the lock at once and the old holder's request
 * rejects with AbortError while its callback keeps running.
 */
export class MemoryLocks implements LockManagerLike {
  readonly #held = new Map<string, Waiter>();
  readonly #queues = new Map<string, Waiter[]>();

  /** Who holds `name` now (for assertions). */
  holder(name: string): unknown {
    return this.#held.get(name);
  }

  request(
    name: string,
    options: { signal?: AbortSignal; steal?: boolean },
    callback: (lock: unknown) => Promise<unknown>,
  ): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const waiter: Waiter = { callback, resolve, reject };
      if (options.steal) {
        const old = this.#held.get(name);
        this.#held.delete(name);
        old?.reject(Object.assign(new Error('The lock was stolen'), { name: 'AbortError' }));
        this.#grant(name, waiter);
        return;
      }
      if (options.signal?.aborted) {
        reject(Object.assign(new Error('Aborted'), { name: 'AbortError' }));
        return;
      }
      const queue = this.#queues.get(name) ?? [];
      this.#queues.set(name, queue);
      queue.push(waiter);
      options.signal?.addEventListener('abort', () => {
        const index = queue.indexOf(waiter);
        if (index < 0) return;
        queue.splice(index, 1);
        reject(Object.assign(new Error('Aborted'), { name: 'AbortError' }));
      });
      this.#next(name);
    });
  }

  #next(name: string): void {
    if (this.#held.has(name)) return;
    const waiter = this.#queues.get(name)?.shift();
    if (waiter) this.#grant(name, waiter);
  }

  #grant(name: string, waiter: Waiter): void {
    this.#held.set(name, waiter);
    Promise.resolve()
      .then(() => waiter.callback({ name }))
      .then(
        (value) => this.#done(name, waiter, () => waiter.resolve(value)),
        (error: unknown) => this.#done(name, waiter, () => waiter.reject(error)),
      );
  }

  #done(name: string, waiter: Waiter, settle: () => void): void {
    if (this.#held.get(name) === waiter) {
      this.#held.delete(name);
      settle();
      this.#next(name);
    }
    // A stolen holder's request was already rejected: its callback's end releases nothing.
  }
}
