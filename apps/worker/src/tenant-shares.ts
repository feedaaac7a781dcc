import { DelayedError, type Job } from 'bullmq';

/** The first wait of a job held back, ms; each next one of the same job twice the last, up to MAX_BUSY_DELAY_MS. */
const FIRST_BUSY_DELAY_MS = 250;
const MAX_BUSY_DELAY_MS = 30_000;
/** Jobs whose holds are counted (the most recently held back; one held back later starts again at 250 ms). */
const MAX_COUNTED = 50_000;

/**
 * How long a job waits when its tenant already has its share running on this worker, ms: 250 ms the
 * first time, doubling each time the same job is held back again (with up to 50 % more, at random, so
 * that waiting jobs do not come back together), at most 30 s. The slot goes to another tenant's job
 * meanwhile, which is what keeps one tenant's slow endpoints from delaying the others. A fixed 250–500 ms
 * made a backlog of 1,500 webhook messages behind a slow endpoint (2xx after 4.5 s: never parked) cost
 * ~3,500 job fetches and ~6,900 scripts a second in Redis, for every tenant, for the half hour it lasted.
 */
function busyDelayMs(holds: number): number {
  const doubled = FIRST_BUSY_DELAY_MS * 2 ** Math.min(holds, 16);
  return Math.min(MAX_BUSY_DELAY_MS, Math.round(doubled * (1 + Math.random() / 2)));
}

/**
 * At most `share` jobs of one tenant at once in this worker process (webhook POSTs, Web Push
 * escalations: endpoints a tenant or its users choose, which may hang until their timeout). A job beyond
 * its tenant's share goes back to BullMQ's delayed set for a while (longer each time it comes back too
 * early), holding no worker slot meanwhile.
 *
 * @example
 * ```ts
 * const shares = new TenantShares(4);
 * const result = await shares.run(job, token, job.data.tenantId, () => send(job.data));
 * ```
 */
export class TenantShares {
  readonly #active = new Map<string, number>();
  /** How many times each job waiting for its tenant's share was held back (by job id). */
  readonly #holds = new Map<string, number>();

  constructor(private readonly share: number) {}

  /** Runs `work` within `tenantId`'s share, else delays `job` (BullMQ's DelayedError); `onBusy` is told. */
  async run<T>(
    job: Job,
    token: string | undefined,
    tenantId: string,
    work: () => Promise<T>,
    onBusy?: () => void,
  ): Promise<T> {
    const busy = this.#active.get(tenantId) ?? 0;
    const id = job.id ?? '';
    if (busy >= this.share) {
      onBusy?.();
      const holds = this.#holds.get(id) ?? 0;
      this.#holds.delete(id);
      this.#holds.set(id, holds + 1);
      if (this.#holds.size > MAX_COUNTED) this.#holds.delete(this.#holds.keys().next().value as string);
      await job.moveToDelayed(Date.now() + busyDelayMs(holds), token);
      throw new DelayedError();
    }
    this.#holds.delete(id);
    this.#active.set(tenantId, busy + 1);
    try {
      return await work();
    } finally {
      const left = (this.#active.get(tenantId) ?? 1) - 1;
      if (left > 0) this.#active.set(tenantId, left);
      else this.#active.delete(tenantId);
    }
  }
}
