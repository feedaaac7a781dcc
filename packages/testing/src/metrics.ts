import parsePrometheusTextFormat from 'parse-prometheus-text-format';

/** One metric family of a Prometheus scrape. */
export interface MetricFamily {
  name: string;
  help: string;
  type: string;
  metrics: {
    value?: string;
    labels?: Record<string, string>;
    buckets?: Record<string, string>;
    count?: string;
  }[];
}

// A sample line of the text exposition format 0.0.4: name, optional labels, value, optional timestamp.
const SAMPLE = /^[a-zA-Z_:][a-zA-Z0-9_:]*(\{.*\})? (NaN|[+-]Inf|[-+]?\d+(\.\d+)?([eE][-+]?\d+)?)( -?\d+)?$/;

/**
 * Scrapes `url` (a `/metrics` endpoint) and parses the Prometheus text format; fails on a status other
 * than 200, a content type other than `text/plain`, or a line that is not a comment or a sample.
 */
export async function scrapeMetrics(url: string): Promise<Map<string, MetricFamily>> {
  const response = await fetch(url);
  const text = await response.text();
  if (response.status !== 200) throw new Error(`${url} answered ${response.status}: ${text}`);
  const type = response.headers.get('content-type') ?? '';
  if (!type.startsWith('text/plain')) throw new Error(`${url}: content type ${type}, not text/plain`);
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    if (!SAMPLE.test(line)) throw new Error(`${url}: not a Prometheus sample line: ${line}`);
  }
  const families = parsePrometheusTextFormat(text) as MetricFamily[];
  return new Map(families.map((family) => [family.name, family]));
}
