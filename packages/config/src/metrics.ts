import { Gauge, type Registry } from 'prom-client';
import { settleWithin } from './settle-within.js';

/**
 * How long a scrape waits for the queue depth: a frozen or paused Redis keeps its connections and
 * answers nothing, and a scrape that waited for it would time out whole (Prometheus: 10 s by default),
 * every other metric of the instance lost with it.
 */
export const QUEUE_DEPTH_TIMEOUT_MS = 1000;

/**
 * `registry`'s samples in the Prometheus text format, for `/metrics`: prom-client's, with a value that
 * is not a number spelled `NaN` (the text format's and OpenMetrics' spelling) where prom-client writes
 * `Nan` (its event loop lag before the first sample, a scrape just after a start), which strict parsers
 * refuse.
 *
 * @example
 * ```ts
 * const { contentType, body } = await exposition(registry);
 * ```
 */
export async function exposition(registry: Registry): Promise<{ contentType: string; body: string }> {
  // A sample line ends with its value: no timestamps are written.
  const body = (await registry.metrics()).replace(/^([^#].*) Nan$/gm, '$1 NaN');
  return { contentType: registry.contentType, body };
}

/**
 * `herald_queue_jobs{state}`: the notification queue's jobs by state, read from Redis on every scrape
 * (`queueCounts`, e.g. BullMQ's `queue.getJobCounts()`), in `registry`. The gateway and the worker both
 * report it, so either one's scrape shows the backlog. With Redis down, or not answering within
 * {@link QUEUE_DEPTH_TIMEOUT_MS}, the scrape still answers, with the last known depth.
 *
 * @example
 * ```ts
 * queueDepthGauge(registry, () => queue.getJobCounts());
 * ```
 */
export function queueDepthGauge(
  registry: Registry,
  queueCounts: () => Promise<Record<string, number>>,
): Gauge<'state'> {
  return new Gauge({
    name: 'herald_queue_jobs',
    help: 'Jobs in the notification queue by state (read on scrape)',
    labelNames: ['state'],
    registers: [registry],
    async collect() {
      try {
        const counts = await settleWithin(queueCounts(), QUEUE_DEPTH_TIMEOUT_MS, undefined);
        for (const [state, count] of Object.entries(counts ?? {})) this.set({ state }, count);
      } catch {
        // Redis down: the scrape still answers, with the last known depth.
      }
    },
  });
}

/** What {@link queueStallGauge} reads of a BullMQ `Queue` (a `Queue` is one). */
export interface WatchedQueue {
  /** `<prefix>:<name>`: the `queue` label. */
  readonly qualifiedName: string;
  /** BullMQ's key of the queue's `type` (`wait`: the list of waiting jobs; `prioritized`, `delayed`: sets). */
  toKey(type: string): string;
  getBackend(): {
    readonly client: Promise<{
      lrange(key: string, start: number, end: number): Promise<string[]>;
      zrange(key: string, start: number, end: number, options?: { WITHSCORES?: boolean }): Promise<string[]>;
    }>;
  };
}

/** BullMQ's delayed score: the ms the job is due at × 0x1000, plus a counter. */
const DELAYED_SCORE_FACTOR = 0x1000;

/**
 * The jobs next in line of one queue: the oldest waiting one (BullMQ LPUSHes and its workers take
 * from the tail), the prioritized one a worker takes next, and the first delayed one once it is due
 * (a worker moves it to wait). Null where there is none.
 */
async function headsOf(queue: WatchedQueue, now: number): Promise<(string | null)[]> {
  const client = await queue.getBackend().client;
  // Sent together: one round trip.
  const [[tail], [next], [first, score]] = await Promise.all([
    client.lrange(queue.toKey('wait'), -1, -1),
    client.zrange(queue.toKey('prioritized'), 0, 0),
    client.zrange(queue.toKey('delayed'), 0, 0, { WITHSCORES: true }),
  ]);
  const due = first !== undefined && Math.floor(Number(score) / DELAYED_SCORE_FACTOR) <= now;
  return [tail ?? null, next ?? null, due ? first : null];
}

/**
 * `herald_queue_stalled_seconds{queue}`: for each partition of the notification queue, how long its job
 * next in line has stayed next, seen by this instance's scrapes; 0 when nothing waits or the line moves.
 * It rises when no worker takes that partition's jobs (every worker gone, or one wedged: a partition
 * that stops while the others run leaves `herald_queue_jobs` low, and its users get nothing), whatever
 * the rate. Measured on this process's monotonic clock from the first scrape that saw the job next (a
 * job's own timestamp is the sending gateway's clock): it starts at 0 after a restart, and its
 * resolution is the scrape interval. Three lines are watched: waiting jobs, prioritized jobs, and
 * delayed jobs that are due (by this process's clock); the gauge is the longest. With Redis down, or
 * not answering within {@link QUEUE_DEPTH_TIMEOUT_MS}, the last values stay.
 *
 * @example
 * ```ts
 * queueStallGauge(registry, () => queues);
 * ```
 */
export function queueStallGauge(registry: Registry, queues: () => readonly WatchedQueue[]): Gauge<'queue'> {
  /** Per queue, per line: the job next and since when (performance.now()) it has been. */
  const seen = new Map<string, { head: string | null; since: number }[]>();
  const observe = async (queue: WatchedQueue, gauge: Gauge<'queue'>) => {
    const heads = await headsOf(queue, Date.now());
    const now = performance.now();
    const previous = seen.get(queue.qualifiedName);
    // A line keeps its `since` while the same job is next; a new one (or none) starts now.
    const lines = heads.map((head, i) => {
      const line = previous?.[i];
      return line?.head === head ? line : { head, since: now };
    });
    seen.set(queue.qualifiedName, lines);
    const stalledMs = Math.max(
      0,
      ...lines.filter(({ head }) => head !== null).map(({ since }) => now - since),
    );
    gauge.set({ queue: queue.qualifiedName }, Math.round(stalledMs) / 1000);
  };
  return new Gauge({
    name: 'herald_queue_stalled_seconds',
    help: 'Seconds the job next in line of each notification queue partition has stayed next (0: nothing waits, or the line moves), seen by this instance',
    labelNames: ['queue'],
    registers: [registry],
    async collect() {
      // Each queue on its own: one that fails (its master down) keeps its last value, the others go on.
      await settleWithin(
        Promise.allSettled(queues().map((queue) => observe(queue, this))),
        QUEUE_DEPTH_TIMEOUT_MS,
        undefined,
      );
    },
  });
}
