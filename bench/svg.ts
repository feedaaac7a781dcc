// Grouped horizontal bar charts as SVG files beside bench/README.md (bench/charts/<name>.svg), for the
// report's figures side by side (before/after, per master, per percentile). d3-scale gives the scale and
// its ticks ("nice" bounds, 1-2-5 steps); the SVG around them is assembled here, as soak/plot.ts does.
import { mkdirSync, writeFileSync } from 'node:fs';
import { scaleLinear } from 'd3-scale';

/**
 * One group of bars (a row label) and its value per series, in the series' order; a group with fewer
 * values than series (one measured by the first series only) takes the room of its own bars only.
 */
export interface BarGroup {
  label: string;
  values: (number | undefined)[];
}

export interface BarChart {
  title: string;
  /** The value axis' unit, e.g. "µs per notification". */
  unit: string;
  /** The series' names, one colour each (e.g. this checkout, the baseline). */
  series: string[];
  groups: BarGroup[];
}

// Tableau 10's first colours: told apart by most readers, also in greyscale print.
const COLOURS = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#b07aa1'];
const WIDTH = 880;
const LABEL = 250;
const BAR = 16;
const GAP = 12;
const TOP = 64;
const BOTTOM = 40;

const xmlText = (text: string) =>
  text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
// Thousands separated (a limiter's 1,561,100 decisions/s), fewer decimals as values grow.
const figure = (value: number) =>
  value >= 100
    ? Math.round(value).toLocaleString('en-US')
    : value >= 10
      ? value.toFixed(1)
      : value.toFixed(2);
const LEGEND_ROW = 18;

/** The SVG of `chart`: a row per group, a bar per series, each with its value at its end. */
export function barChartSvg(chart: BarChart): string {
  const values = chart.groups.flatMap((group) => group.values).filter((v): v is number => Number.isFinite(v));
  const x = scaleLinear()
    .domain([0, Math.max(1, ...values) * 1.12])
    .range([LABEL, WIDTH - 24])
    .nice();
  // The legend wraps onto further rows (each series' swatch and name) rather than run off the right edge.
  const legend: { x: number; row: number; name: string }[] = [];
  let legendX = 16;
  let legendRow = 0;
  for (const name of chart.series) {
    const width = 28 + name.length * 7;
    if (legendX > 16 && legendX + width > WIDTH - 16) {
      legendX = 16;
      legendRow++;
    }
    legend.push({ x: legendX, row: legendRow, name });
    legendX += width;
  }
  const top = TOP + legendRow * LEGEND_ROW;
  const bars = (group: BarGroup) => Math.max(1, Math.min(chart.series.length, group.values.length));
  const height = top + chart.groups.reduce((sum, group) => sum + bars(group) * BAR + GAP, 0) + BOTTOM;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="${xmlText(chart.title)}" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="system-ui, sans-serif" font-size="12">`,
    `<title>${xmlText(chart.title)}</title>`,
    `<rect width="${WIDTH}" height="${height}" fill="#fff"/>`,
    `<text x="16" y="24" font-size="15" font-weight="600">${xmlText(chart.title)}</text>`,
  ];
  for (const [i, { x: lx, row, name }] of legend.entries()) {
    const y = 36 + row * LEGEND_ROW;
    parts.push(`<rect x="${lx}" y="${y}" width="12" height="12" fill="${COLOURS[i % COLOURS.length]}"/>`);
    parts.push(`<text x="${lx + 16}" y="${y + 10}">${xmlText(name)}</text>`);
  }
  // Grid and ticks.
  const bottom = height - BOTTOM;
  for (const tick of x.ticks(6)) {
    const px = x(tick);
    parts.push(`<line x1="${px}" y1="${top - 6}" x2="${px}" y2="${bottom}" stroke="#e5e5e5"/>`);
    parts.push(
      `<text x="${px}" y="${bottom + 16}" text-anchor="middle" fill="#555">${tick.toLocaleString('en-US')}</text>`,
    );
  }
  parts.push(
    `<text x="${(LABEL + WIDTH) / 2}" y="${bottom + 32}" text-anchor="middle" fill="#555">${xmlText(chart.unit)}</text>`,
  );
  let y0 = top;
  for (const group of chart.groups) {
    parts.push(
      `<text x="${LABEL - 8}" y="${y0 + (bars(group) * BAR) / 2 + 4}" text-anchor="end">${xmlText(group.label)}</text>`,
    );
    for (const [i, value] of group.values.entries()) {
      if (value === undefined || !Number.isFinite(value)) continue;
      const y = y0 + i * BAR;
      const end = x(value);
      parts.push(
        `<rect x="${LABEL}" y="${y}" width="${Math.max(0.5, end - LABEL)}" height="${BAR - 3}" fill="${COLOURS[i % COLOURS.length]}"/>`,
      );
      parts.push(`<text x="${end + 4}" y="${y + BAR - 6}" fill="#333">${figure(value)}</text>`);
    }
    y0 += bars(group) * BAR + GAP;
  }
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}

/**
 * Writes `chart` to bench/charts/`name`.svg and answers the Markdown that shows it in bench/README.md;
 * `BENCH_WRITE_README=0` writes nothing (the run is not reported).
 */
export function writeChart(name: string, chart: BarChart): string {
  const markdown = `![${chart.title}](charts/${name}.svg)`;
  if (process.env.BENCH_WRITE_README === '0') return markdown;
  const dir = new URL('./charts/', import.meta.url);
  mkdirSync(dir, { recursive: true });
  writeFileSync(new URL(`${name}.svg`, dir), barChartSvg(chart));
  return markdown;
}
