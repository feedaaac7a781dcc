import { HeraldError } from './errors.js';
import type { TabElection, TabMessage } from './tabs.js';

interface Pending {
  resolve(value: unknown): void;
  reject(error: unknown): void;
  op: string;
  args: unknown;
  timer: ReturnType<typeof setTimeout>;
}

/** The commands a follower tab asks the leader tab to run, until the leader answers (`res`) or time runs out. */
export class TabRequests {
  readonly #pending = new Map<string, Pending>();
  readonly #tabs: () => TabElection | undefined;
  readonly #timeoutMs: number;
  #next = 0;

  constructor(tabs: () => TabElection | undefined, timeoutMs: number) {
    this.#tabs = tabs;
    this.#timeoutMs = timeoutMs;
  }

  send(op: string, args: unknown): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const id = `${this.#tabs()?.id}:${this.#next++}`;
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new HeraldError('HERALD_ERR_TIMEOUT', `No leader tab answered ${op} in time: retry.`));
      }, this.#timeoutMs);
      this.#pending.set(id, { resolve, reject, op, args, timer });
      this.#tabs()?.post({ t: 'req', id, op, args });
    });
  }

  /** A new leader: sends it again what the old one did not answer. */
  resend(): void {
    for (const [id, pending] of this.#pending)
      this.#tabs()?.post({ t: 'req', id, op: pending.op, args: pending.args });
  }

  /**
   * This tab leads now: what it asked of a leader (before it won the election, or of a leader that
   * went away) runs here instead, through `runner` (its own socket).
   */
  runHere<C>(c: C, runner: (c: C, op: string, args: unknown) => Promise<unknown>): void {
    for (const [id, request] of this.#pending) {
      this.#pending.delete(id);
      clearTimeout(request.timer);
      runner(c, request.op, request.args).then(request.resolve, request.reject);
    }
  }

  /** The leader's answer (`res`), if it is for this tab. */
  settle(message: TabMessage): void {
    if (message.to !== this.#tabs()?.id) return;
    const pending = this.#pending.get(message.id as string);
    if (!pending) return;
    this.#pending.delete(message.id as string);
    clearTimeout(pending.timer);
    if (message.ok) pending.resolve(message.value);
    else {
      const error = message.error as { code: string; message: string };
      pending.reject(new HeraldError(error.code, error.message));
    }
  }

  /** Rejects every request still waiting (the client was closed). */
  close(): void {
    for (const pending of this.#pending.values()) {
      clearTimeout(pending.timer);
      pending.reject(new HeraldError('HERALD_ERR_CLOSED', 'The client was closed.'));
    }
    this.#pending.clear();
  }
}
