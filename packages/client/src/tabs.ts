/** The part of `navigator.locks` (Web Locks) the tabs need; injectable (Node 20 has none). */
export interface LockManagerLike {
  request(
    name: string,
    options: { signal?: AbortSignal; steal?: boolean; mode?: 'exclusive' },
    callback: (lock: unknown) => Promise<unknown>,
  ): Promise<unknown>;
}

/** The part of `BroadcastChannel` the tabs need. */
export interface ChannelLike {
  postMessage(message: unknown): void;
  close(): void;
  onmessage: ((event: { data: unknown }) => void) | null;
}

/** Settings of {@link TabElection}. */
export interface TabElectionOptions {
  /** The lock and channel name: one per browser profile, Herald origin, tenant and user. */
  name: string;
  locks: LockManagerLike;
  channel: ChannelLike;
  /** The leader says it is alive this often (ms; default 2000). */
  heartbeatMs: number;
  /** A visible follower steals the lock after this long without a heartbeat (ms; default 6000). */
  leaderTimeoutMs: number;
  /** May this tab steal a silent leader's lock now? (Only a visible tab: two hidden ones would flap.) */
  maySteal: () => boolean;
  onLead: () => void;
  onFollow: () => void;
  onMessage: (message: TabMessage) => void;
}

/** A message between tabs (plain JSON: it crosses `BroadcastChannel` by structured clone). */
export type TabMessage = { from: string } & Record<string, unknown> & { t: string };

/**
 * One leader per user across a browser's tabs: the holder of an exclusive Web Lock. The browser frees
 * the lock when the leader's page goes away (closed, crashed, navigated), and the next waiting tab gets
 * it: no timers decide, so background-tab throttling never elects two leaders. A leader that is frozen
 * keeps its lock, though, so the leader also heartbeats on the channel, and a visible follower that
 * hears nothing for `leaderTimeoutMs` takes the lock with `steal: true`; the old leader's lock request
 * then rejects with `AbortError` and it steps down when it thaws.
 */
export class TabElection {
  /** This tab's, among the user's tabs of this browser: ~52 random bits. */
  readonly id = Math.random().toString(36).slice(2);
  readonly #options: TabElectionOptions;
  #leading = false;
  #stopped = false;
  #waiting: AbortController | undefined;
  #release: (() => void) | undefined;
  #heartbeat: ReturnType<typeof setInterval> | undefined;
  #watch: ReturnType<typeof setInterval> | undefined;
  #lastHeard = Date.now();
  /** Bumped on every new lock request, so that a stale request's outcome is ignored. */
  #generation = 0;

  constructor(options: TabElectionOptions) {
    this.#options = options;
    options.channel.onmessage = (event) => this.#receive(event.data);
  }

  get leading(): boolean {
    return this.#leading;
  }

  start(): void {
    this.#stopped = false;
    this.#lastHeard = Date.now();
    this.#request(false);
    this.#watch = setInterval(() => this.check(), Math.max(100, Math.floor(this.#options.heartbeatMs / 2)));
  }

  /** Posts to every other tab of this user. */
  post(message: Record<string, unknown> & { t: string }): void {
    if (this.#stopped) return;
    try {
      this.#options.channel.postMessage({ ...message, from: this.id });
    } catch {
      // a closed channel (the page is going away)
    }
  }

  /** The leader's heartbeat, also sent on every server ping (which hidden-tab timer throttling spares). */
  beat(): void {
    if (this.#leading) this.post({ t: 'hb' });
  }

  /** A follower checks that the leader still speaks; steals its lock when it has not for too long. */
  check(): void {
    if (this.#stopped || this.#leading) return;
    if (Date.now() - this.#lastHeard < this.#options.leaderTimeoutMs || !this.#options.maySteal()) return;
    this.#lastHeard = Date.now();
    this.#request(true);
  }

  /** Leaves the election: releases the lock (the next tab leads) or stops waiting for it. */
  stop(): void {
    this.#stopped = true;
    this.#generation++;
    this.#waiting?.abort();
    this.#waiting = undefined;
    clearInterval(this.#heartbeat);
    clearInterval(this.#watch);
    const release = this.#release;
    this.#release = undefined;
    this.#leading = false;
    release?.();
  }

  close(): void {
    this.stop();
    this.#options.channel.onmessage = null;
    this.#options.channel.close();
  }

  #receive(data: unknown): void {
    if (this.#stopped || typeof data !== 'object' || data === null) return;
    const message = data as TabMessage;
    if (message.from === this.id) return;
    if (message.t === 'hb' || message.t === 'lead') this.#lastHeard = Date.now();
    this.#options.onMessage(message);
  }

  #request(steal: boolean): void {
    const generation = ++this.#generation;
    this.#waiting?.abort();
    const waiting = steal ? undefined : new AbortController();
    this.#waiting = waiting;
    const options = steal ? { steal: true } : { signal: (waiting as AbortController).signal };
    this.#options.locks
      .request(this.#options.name, options, () => {
        if (generation !== this.#generation || this.#stopped) return Promise.resolve();
        return new Promise<void>((resolve) => {
          this.#release = resolve;
          this.#lead();
        });
      })
      .then(
        () => {},
        (error: unknown) => {
          // AbortError: our wait was cancelled (we stole, or stopped), or our lock was stolen.
          if (generation !== this.#generation || this.#stopped) return;
          if (this.#leading) {
            this.#leading = false;
            this.#release = undefined;
            clearInterval(this.#heartbeat);
            this.#lastHeard = Date.now();
            this.#options.onFollow();
          }
          if ((error as { name?: string })?.name === 'AbortError' || !steal) this.#request(false);
        },
      );
  }

  #lead(): void {
    this.#waiting = undefined;
    this.#leading = true;
    this.post({ t: 'lead' });
    clearInterval(this.#heartbeat);
    this.#heartbeat = setInterval(() => this.beat(), this.#options.heartbeatMs);
    this.#options.onLead();
  }
}
