import { DelayedError, type Job } from 'bullmq';

/**
 * How long a job waits when its tenant already has its share running on this worker, ms (250-500,
 * random so that waiting jobs do not come back together): the slot goes to another tenant's job
 * meanwhile, which is what keeps one tenant's slow endpoints from delaying the others.
 */
const busyDelayMs = () => 250 + Math.floor(Math.random() * 250);

/**
 * At most `share` jobs of one tenant at once in this worker process (webhook POSTs, Web Push
 * escalations: endpoints a tenant or its users choose, which may hang until their timeout). A job beyond
 * its tenant's share goes back to BullMQ's delayed set for a moment, holding no worker slot meanwhile.
 *
 * @example
 * ```ts
 * const shares = new TenantShares(4);
 * const result = await shares.run(job, token, job.data.tenantId, () => send(job.data));
 * ```
 */
export class TenantShares {
  readonly #active = new Map<string, number>();

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
    if (busy >= this.share) {
      onBusy?.();
      await job.moveToDelayed(Date.now() + busyDelayMs(), token);
      throw new DelayedError();
    }
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
