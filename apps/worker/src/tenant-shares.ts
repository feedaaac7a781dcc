import { DelayedError, type Job } from 'bullmq';

/** Shortest and longest wait of a job held back for its tenant's share, ms. */
const MIN_BUSY_DELAY_MS = 250;
const MAX_BUSY_DELAY_MS = 30_000;
/** A held job not seen again for this long is no longer counted as waiting (another worker ran it). */
const WAITING_FORGET_MS = 60_000;
/** Held jobs counted at most, all tenants together (the oldest forgotten first). */
const MAX_COUNTED = 50_000;
/** Weight of the latest job in a tenant's average job time. */
const AVERAGE_WEIGHT = 0.2;

/**
 * How long a job waits when its tenant already has its share running on this worker, ms: about when its
 * turn comes, after `ahead / share + 1` jobs of `turnMs` each (`ahead`: the tenant's jobs held back
 * before it and waiting still; `turnMs`: how long one of them takes), at least 250 ms and at most 30 s, with up to 50 % more at random so that waiting jobs do
 * not come back together. The slot goes to another tenant's job meanwhile, which is what keeps one
 * tenant's slow endpoints from delaying the others. A fixed 250–500 ms made a backlog of 1,500 webhook
 * messages behind a slow endpoint (2xx after 4.5 s: never parked) cost ~3,500 job fetches and ~6,900
 * scripts a second in Redis, for every tenant, for the half hour it lasted; a wait doubling per hold left
 * a fast endpoint idle for seconds while a burst of its messages sat out their long waits.
 *
 * @example
 * ```ts
 * busyDelayMs(1500, 4, 4500); // ~30 s: a slow endpoint's backlog comes back at 50 fetches a second
 * busyDelayMs(2400, 4, 10); // ~6 s for the last of a fast one's: each comes back as its slot frees
 * ```
 */
export function busyDelayMs(ahead: number, share: number, turnMs: number, random = Math.random()): number {
  const turn = (Math.floor(Math.max(0, ahead) / Math.max(1, share)) + 1) * Math.max(0, turnMs);
  return Math.round(Math.min(MAX_BUSY_DELAY_MS, Math.max(MIN_BUSY_DELAY_MS, turn)) * (1 + random / 2));
}

/**
 * At most `share` jobs of one tenant at once in this worker process (webhook POSTs, Web Push
 * escalations: endpoints a tenant or its users choose, which may hang until their timeout). A job beyond
 * its tenant's share goes back to BullMQ's delayed set until about when its turn comes
 * ({@link busyDelayMs}), holding no worker slot meanwhile.
 *
 * @example
 * ```ts
 * const shares = new TenantShares(4);
 * const result = await shares.run(job, token, job.data.tenantId, () => send(job.data));
 * ```
 */
export class TenantShares {
  /** Per tenant, when each of its running jobs started (at most `share`). */
  readonly #running = new Map<string, number[]>();
  /** Per tenant, its average job time (ms), from the jobs that ended. */
  readonly #averageMs = new Map<string, number>();
  /** Per tenant, its jobs held back and not run since, by id: when each was last held (oldest first). */
  readonly #waiting = new Map<string, Map<string, number>>();
  #counted = 0;

  constructor(private readonly share: number) {}

  /** Runs `work` within `tenantId`'s share, else delays `job` (BullMQ's DelayedError); `onBusy` is told. */
  async run<T>(
    job: Job,
    token: string | undefined,
    tenantId: string,
    work: () => Promise<T>,
    onBusy?: () => void,
  ): Promise<T> {
    const running = this.#running.get(tenantId) ?? [];
    const id = job.id ?? '';
    const now = Date.now();
    if (running.length >= this.share) {
      onBusy?.();
      const ahead = this.#hold(tenantId, id, now);
      // One job's time: the average of those that ended, or as long as the oldest running one has taken
      // already when that is longer (an endpoint that hangs now).
      const oldest = Math.min(...running);
      const turnMs = Math.max(this.#averageMs.get(tenantId) ?? 0, now - oldest);
      await job.moveToDelayed(now + busyDelayMs(ahead, this.share, turnMs), token);
      throw new DelayedError();
    }
    this.#forget(tenantId, id);
    running.push(now);
    this.#running.set(tenantId, running);
    try {
      return await work();
    } finally {
      const ended = Date.now();
      const at = running.indexOf(now);
      if (at >= 0) running.splice(at, 1);
      if (running.length === 0) this.#running.delete(tenantId);
      const average = this.#averageMs.get(tenantId);
      this.#averageMs.set(
        tenantId,
        average === undefined ? ended - now : average + AVERAGE_WEIGHT * (ended - now - average),
      );
      if (this.#averageMs.size > MAX_COUNTED)
        this.#averageMs.delete(this.#averageMs.keys().next().value as string);
    }
  }

  /**
   * Counts `id` as waiting for `tenantId`'s share, in the order the tenant's jobs were first held back;
   * answers how many wait before it.
   */
  #hold(tenantId: string, id: string, now: number): number {
    let waiting = this.#waiting.get(tenantId);
    if (waiting === undefined) {
      waiting = new Map();
      this.#waiting.set(tenantId, waiting);
    }
    // Those not held again for WAITING_FORGET_MS were run elsewhere, or are gone.
    for (const [old, at] of waiting) {
      if (now - at < WAITING_FORGET_MS && this.#counted <= MAX_COUNTED) continue;
      waiting.delete(old);
      this.#counted--;
    }
    let ahead = 0;
    for (const waitingId of waiting.keys()) {
      if (waitingId === id) break;
      ahead++;
    }
    if (!waiting.has(id)) this.#counted++;
    // Its place kept (a Map keeps the first insertion's order): held again, it is no further back.
    waiting.set(id, now);
    return ahead;
  }

  #forget(tenantId: string, id: string): void {
    const waiting = this.#waiting.get(tenantId);
    if (waiting?.delete(id)) this.#counted--;
    if (waiting?.size === 0) this.#waiting.delete(tenantId);
  }
}
