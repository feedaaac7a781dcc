/**
 * The operator dashboard's figures in Redis: what every gateway and realtime instance aggregates in
 * memory and writes once per second (never once per request or notification), and what the gateway's
 * admin API reads back. Every key of a deployment shares the hash tag `{<deployment>}`, so one MULTI
 * writes them all on Redis Cluster too.
 */

/** How long a per-second key lives (s): the admin API reads the last {@link STATS_WINDOW_SECONDS}. */
export const STATS_TTL_SECONDS = 120;

/** The seconds the admin API sums or charts (the last minute). */
export const STATS_WINDOW_SECONDS = 60;

/** A realtime instance not heard from within this (ms) is gone from the dashboard. */
export const INSTANCE_STALE_MS = 3000;

/**
 * The stats keys of one deployment under `keyPrefix` (`HERALD_KEY_PREFIX`), e.g.
 * `herald:stats:{herald}:traffic:1767225600`.
 *
 * - `traffic(s)`: hash of second `s` (unix seconds) of every gateway's rate-limit decisions: `allowed`,
 *   `denied`, `denied:<policy>`.
 * - `hot(s)`, `hotDenied(s)`: sorted sets of second `s`: per recipient (`<tenant>/<user>`), decisions
 *   and denials (each gateway adds its 20 busiest recipients of the second).
 * - `delivery(s)`: hash of second `s` of every realtime instance: resume outcomes (`fresh`,
 *   `recovered`, `resync`, `replayed`) and delivery latency buckets (`lat:<bucket>`, see
 *   {@link latencyBucket}).
 * - `instances`: sorted set of realtime instance ids by last heartbeat (ms); `instance(id)`: that
 *   instance's heartbeat (JSON `{ connections, at }`, expires after {@link INSTANCE_STALE_MS}).
 *
 * @example
 * ```ts
 * const keys = statsKeys('herald:', 'herald');
 * await redis.hgetall(keys.traffic(Math.floor(Date.now() / 1000) - 1));
 * ```
 */
export function statsKeys(keyPrefix: string, deployment: string) {
  const base = `${keyPrefix}stats:{${deployment}}:`;
  return {
    traffic: (second: number) => `${base}traffic:${second}`,
    hot: (second: number) => `${base}hot:${second}`,
    hotDenied: (second: number) => `${base}hot-denied:${second}`,
    delivery: (second: number) => `${base}delivery:${second}`,
    instances: `${base}instances`,
    instance: (id: string) => `${base}instance:${id}`,
  } as const;
}

/** The keys {@link statsKeys} answers. */
export type StatsKeys = ReturnType<typeof statsKeys>;

/**
 * Latency buckets per doubling. The histogram is log-linear, the layout of a Prometheus native
 * histogram of schema 2: bucket `b ≥ 1` holds latencies in `[2^((b-1)/4), 2^(b/4))` ms, so each bucket
 * is 2^(1/4) ≈ 1.19 times the previous and a percentile read from it is at most 19 % high. Fixed
 * boundaries let every instance add its counts to the same hash fields (`HINCRBY`), which a per-instance
 * HDR histogram would not.
 */
export const LATENCY_BUCKETS_PER_DOUBLING = 4;

/** Latencies of an hour or more share the last bucket. */
export const MAX_LATENCY_BUCKET = 1 + Math.floor(LATENCY_BUCKETS_PER_DOUBLING * Math.log2(3_600_000));

/**
 * The bucket of a latency of `ms` milliseconds: 0 below 1 ms (and for a negative one, from clock
 * skew between the apps), else `1 + floor(4 · log2(ms))`, at most {@link MAX_LATENCY_BUCKET}.
 *
 * @example
 * ```ts
 * latencyBucket(0.4); // 0
 * latencyBucket(100); // 27: [2^6.5, 2^6.75) = [90.5, 107.6) ms
 * ```
 */
export function latencyBucket(ms: number): number {
  if (!(ms >= 1)) return 0;
  return Math.min(MAX_LATENCY_BUCKET, 1 + Math.floor(LATENCY_BUCKETS_PER_DOUBLING * Math.log2(ms)));
}

/** The upper bound (ms) of bucket `bucket`: 1 for bucket 0, `2^(b/4)` otherwise. */
export function latencyBucketUpperMs(bucket: number): number {
  return bucket <= 0 ? 1 : 2 ** (bucket / LATENCY_BUCKETS_PER_DOUBLING);
}

/** Latency percentiles (ms, each the upper bound of its bucket, 0.1 ms resolution) of a histogram. */
export interface LatencySummary {
  count: number;
  p50: number | null;
  p90: number | null;
  p99: number | null;
  max: number | null;
}

/**
 * The percentiles of a histogram given as counts per bucket: the upper bound of the bucket that holds
 * the rank (nearest-rank method), so never below the true value and at most 19 % above it.
 *
 * @example
 * ```ts
 * latencySummary(new Map([[27, 99], [40, 1]])); // { count: 100, p50: 107.6, p90: 107.6, p99: 107.6, max: 1024 }
 * ```
 */
export function latencySummary(counts: ReadonlyMap<number, number>): LatencySummary {
  const buckets = [...counts].filter(([, count]) => count > 0).sort(([a], [b]) => a - b);
  const count = buckets.reduce((sum, [, n]) => sum + n, 0);
  const at = (quantile: number): number | null => {
    if (count === 0) return null;
    const rank = Math.max(1, Math.ceil(quantile * count));
    let seen = 0;
    for (const [bucket, n] of buckets) {
      seen += n;
      if (seen >= rank) return Math.round(latencyBucketUpperMs(bucket) * 10) / 10;
    }
    return null;
  };
  return { count, p50: at(0.5), p90: at(0.9), p99: at(0.99), max: at(1) };
}

/**
 * Calls `tick(second)` just after each wall-clock second ends (`offsetMs` after the boundary), with
 * that second (unix seconds): the rhythm of the once-per-second flushes and reads. The timer does not
 * keep the process alive. `clock` gives the seconds (ms since the epoch): the apps pass Redis's
 * (`RedisClock`), so that every instance writes a second into the same key whatever its own clock says
 * (a gateway 150 s behind wrote its decisions where no snapshot read them).
 *
 * @example
 * ```ts
 * const ticker = everySecond((second) => flush(second));
 * ticker.stop();
 * ```
 */
export function everySecond(
  tick: (second: number) => void,
  offsetMs = 50,
  clock: () => number = Date.now,
): { stop(): void } {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const schedule = () => {
    const now = clock();
    timer = setTimeout(
      () => {
        if (stopped) return;
        // Fired at (or, on a busy loop, after) boundary + offsetMs: the second before that boundary ended.
        tick(Math.floor((clock() - offsetMs) / 1000) - 1);
        schedule();
      },
      1000 - ((now - offsetMs) % 1000),
    );
    timer.unref();
  };
  schedule();
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
