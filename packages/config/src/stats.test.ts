import { describe, expect, it } from 'vitest';
import {
  latencyBucket,
  latencyBucketUpperMs,
  latencySummary,
  MAX_LATENCY_BUCKET,
  statsKeys,
} from './stats.js';

describe('the latency histogram', () => {
  it('puts each latency in the log-linear bucket whose bounds hold it (2^(1/4) apart)', () => {
    for (const ms of [1, 1.1, 1.2, 3, 17, 99.9, 100, 250, 1000, 12_345, 59_999]) {
      const bucket = latencyBucket(ms);
      expect(ms).toBeLessThan(latencyBucketUpperMs(bucket));
      expect(ms).toBeGreaterThanOrEqual(latencyBucketUpperMs(bucket - 1));
      expect(latencyBucketUpperMs(bucket) / ms).toBeLessThanOrEqual(2 ** 0.25 + 1e-9);
    }
    expect([latencyBucket(0), latencyBucket(0.99), latencyBucket(-50), latencyBucket(Number.NaN)]).toEqual([
      0, 0, 0, 0,
    ]);
    expect(latencyBucket(100)).toBe(27);
    expect(latencyBucket(10 * 3_600_000)).toBe(MAX_LATENCY_BUCKET);
  });

  it('reads nearest-rank percentiles as bucket upper bounds', () => {
    expect(latencySummary(new Map())).toEqual({ count: 0, p50: null, p90: null, p99: null, max: null });
    const counts = new Map<number, number>();
    for (let i = 1; i <= 100; i++) {
      const bucket = latencyBucket(i);
      counts.set(bucket, (counts.get(bucket) ?? 0) + 1);
    }
    const summary = latencySummary(counts);
    expect(summary.count).toBe(100);
    // Never below the true value, at most 19 % above it.
    for (const [value, truth] of [
      [summary.p50, 50],
      [summary.p90, 90],
      [summary.p99, 99],
      [summary.max, 100],
    ] as const) {
      expect(value).toBeGreaterThanOrEqual(truth);
      expect(value).toBeLessThanOrEqual(truth * 1.19 + 0.1);
    }
  });
});

describe('statsKeys', () => {
  it('puts every key of a deployment in one hash slot ({deployment})', () => {
    const keys = statsKeys('herald:', 'prod');
    for (const key of [
      keys.traffic(1),
      keys.hot(1),
      keys.hotDenied(1),
      keys.delivery(1),
      keys.instances,
      keys.instance('rt-1'),
    ]) {
      expect(key.startsWith('herald:stats:{prod}:')).toBe(true);
    }
  });
});
