import { Gauge, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { exposition } from './metrics.js';

describe('the /metrics exposition', () => {
  it('spells a value that is not a number NaN, as the text format and OpenMetrics do, not prom-client’s Nan', async () => {
    const registry = new Registry();
    // What prom-client's event loop lag reports before its first sample (a scrape just after a start).
    const lag = new Gauge({ name: 'lag_seconds', help: 'lag', labelNames: ['kind'], registers: [registry] });
    lag.set({ kind: 'mean' }, Number.NaN);
    lag.set({ kind: 'max' }, Number.POSITIVE_INFINITY);
    new Gauge({ name: 'Nan', help: 'a metric named Nan keeps its name', registers: [registry] }).set(1);
    const { body, contentType } = await exposition(registry);
    expect(contentType).toBe(registry.contentType);
    expect(body).toContain('lag_seconds{kind="mean"} NaN\n');
    expect(body).toContain('lag_seconds{kind="max"} +Inf\n');
    expect(body).toContain('\nNan 1\n');
    expect(body).not.toMatch(/ Nan$/m);
  });
});
