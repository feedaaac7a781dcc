import { randomUUID } from 'node:crypto';
import pLimit from 'p-limit';
import type { Accepted, LoadCounts } from './ledger.js';

/**
 * Sends notifications at a fixed rate, round-robin over `users`, each request with its own
 * `Idempotency-Key`, as a real backend would: a 503, a 409 (the key still in flight), a 408 (the request
 * arrived too slowly) or a connection error is retried with the same key and body (a connection error
 * on the next gateway), until a 202, which goes into the ledger. 503s, 409s and 408s are retried after
 * their `Retry-After` (1 s without one).
 */
export class LoadGenerator {
  readonly accepted: Accepted[] = [];
  readonly counts: LoadCounts = {
    accepted: 0,
    unavailable: 0,
    inFlight: 0,
    connectionErrors: 0,
    requestTimeouts: 0,
    other: 0,
    maxAcceptMs: 0,
  };
  /** When each 503 arrived (to count those after a fault's end). */
  readonly unavailableAt: number[] = [];
  /** When each 409 arrived (to count those after a fault's end). */
  readonly inFlightAt: number[] = [];
  /** Answers that were neither retried nor accepted, for the failure message. */
  readonly refusals: string[] = [];
  /** Requests still retrying when `stop`'s deadline passed, given up without a 202. */
  abandoned = 0;

  readonly #pending = new Set<Promise<void>>();
  /**
   * At most this many attempts in flight (the rest wait their turn), as a backend's connection pool
   * holds: on a starved machine an unbounded sender opened a socket per late request (16,000 seen),
   * each timed out and retried, and collapsed into timeouts of its own making.
   */
  readonly #slots: ReturnType<typeof pLimit>;
  #timer: NodeJS.Timeout | undefined;
  #sent = 0;
  #stopped = false;

  constructor(
    private readonly options: {
      /** The gateways' base URLs, read at every attempt (a replaced gateway's URL changes). */
      gateways: () => readonly string[];
      apiKey: string;
      users: readonly string[];
      perSecond: number;
      /**
       * Attempts in flight at most (default 512: during a Redis fault the chaos suite's 100/s and their
       * retries, each held up to its 800 ms Redis timeout or more on a loaded machine, stay below it).
       */
      maxInFlight?: number;
    },
  ) {
    this.#slots = pLimit(options.maxInFlight ?? 512);
  }

  start(): void {
    const startedAt = Date.now();
    // Catches up when the event loop was late, so that the rate holds over the run.
    this.#timer = setInterval(() => {
      const due = Math.floor(((Date.now() - startedAt) * this.options.perSecond) / 1000);
      while (this.#sent < due) this.#track(this.#send(this.#sent++));
    }, 20);
  }

  /** Stops sending new requests and waits for every one started to end in a 202 (or `deadlineMs`). */
  async stop(deadlineMs = 60_000): Promise<void> {
    clearInterval(this.#timer);
    const deadline = new Promise<void>((resolve) => setTimeout(resolve, deadlineMs).unref());
    await Promise.race([Promise.all(this.#pending), deadline]);
    this.abandoned = this.#pending.size;
    this.#stopped = true;
  }

  /** Requests started so far. */
  get sent(): number {
    return this.#sent;
  }

  #track(request: Promise<void>): void {
    this.#pending.add(request);
    void request.finally(() => this.#pending.delete(request));
  }

  async #send(n: number): Promise<void> {
    const users = this.options.users;
    const userId = users[n % users.length] ?? '';
    const body = JSON.stringify({ userId, payload: { n } });
    const key = randomUUID();
    const firstAttempt = Date.now();
    let gateway = n;
    while (!this.#stopped) {
      const urls = this.options.gateways();
      const url = urls[gateway % urls.length];
      let retryMs = 100;
      try {
        // The timeout starts with the attempt, not with the wait for a slot.
        const response = await this.#slots(async () => {
          const answer = await fetch(`${url}/notify`, {
            method: 'POST',
            headers: {
              authorization: `Bearer ${this.options.apiKey}`,
              'content-type': 'application/json',
              'idempotency-key': key,
            },
            body,
            signal: AbortSignal.timeout(5000),
          });
          return { status: answer.status, headers: answer.headers, text: await answer.text() };
        });
        const text = response.text;
        if (response.status === 202) {
          const at = Date.now();
          this.accepted.push({
            id: (JSON.parse(text) as { id: string }).id,
            userId,
            sentAt: firstAttempt,
            at,
          });
          this.counts.accepted++;
          this.counts.maxAcceptMs = Math.max(this.counts.maxAcceptMs, at - firstAttempt);
          return;
        }
        if (response.status === 503) {
          this.counts.unavailable++;
          this.unavailableAt.push(Date.now());
        } else if (response.status === 409) {
          this.counts.inFlight++;
          this.inFlightAt.push(Date.now());
        } else if (response.status === 408) this.counts.requestTimeouts++;
        else {
          this.counts.other++;
          if (this.refusals.length < 5) this.refusals.push(`${response.status} ${text}`);
          return;
        }
        // As the gateway asks (`Retry-After`, whole seconds), spread so that retries do not come in waves.
        retryMs = Number(response.headers.get('retry-after') ?? 1) * 1000 * (0.5 + Math.random() / 2);
      } catch {
        this.counts.connectionErrors++;
        gateway++;
      }
      await new Promise((resolve) => setTimeout(resolve, retryMs));
    }
  }
}
