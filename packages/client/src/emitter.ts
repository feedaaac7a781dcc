type Listener = (...args: never[]) => void;

/** A minimal typed event emitter (a listener that throws does not stop the others). */
export class Emitter<Events extends { [Name in keyof Events]: unknown[] }> {
  readonly #listeners = new Map<keyof Events, Set<Listener>>();
  readonly #onError: (error: unknown) => void;

  constructor(onError: (error: unknown) => void) {
    this.#onError = onError;
  }

  on<Name extends keyof Events>(name: Name, listener: (...args: Events[Name]) => void): () => void {
    let set = this.#listeners.get(name);
    if (!set) {
      set = new Set();
      this.#listeners.set(name, set);
    }
    const stored = listener as unknown as Listener;
    set.add(stored);
    return () => set.delete(stored);
  }

  emit<Name extends keyof Events>(name: Name, ...args: Events[Name]): void {
    for (const listener of this.#listeners.get(name) ?? []) {
      try {
        (listener as unknown as (...args: Events[Name]) => void)(...args);
      } catch (error) {
        this.#onError(error);
      }
    }
  }

  clear(): void {
    this.#listeners.clear();
  }
}
