// Grouped horizontal bar charts as SVG files beside bench/README.md (bench/charts/<name>.svg), for the
// report's figures side by side (before/after, per master, per percentile). d3-scale gives the scale and
// its ticks ("nice" bounds, 1-2-5 steps); the SVG around them is assembled here, as soak/plot.ts does.
import { mkdirSync, writeFileSync } from 'node:fs';
import { scaleLinear } from 'd3-scale';

/** One group of bars (a row label) and its value per series. */
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
const figure = (value: number) =>
  value >= 100 ? value.toFixed(0) : value >= 10 ? value.toFixed(1) : value.toFixed(2);

/** The SVG of `chart`: a row per group, a bar per series, each with its value at its end. */
export function barChartSvg(chart: BarChart): string {
  const values = chart.groups.flatMap((group) => group.values).filter((v): v is number => Number.isFinite(v));
  const x = scaleLinear()
    .domain([0, Math.max(1, ...values) * 1.12])
    .range([LABEL, WIDTH - 24])
    .nice();
  const rowHeight = chart.series.length * BAR + GAP;
  const height = TOP + chart.groups.length * rowHeight + BOTTOM;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="${xmlText(chart.title)}" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="system-ui, sans-serif" font-size="12">`,
    `<title>${xmlText(chart.title)}</title>`,
    `<rect width="${WIDTH}" height="${height}" fill="#fff"/>`,
    `<text x="16" y="24" font-size="15" font-weight="600">${xmlText(chart.title)}</text>`,
  ];
  // Legend.
  let legendX = 16;
  for (const [i, name] of chart.series.entries()) {
    parts.push(`<rect x="${legendX}" y="36" width="12" height="12" fill="${COLOURS[i % COLOURS.length]}"/>`);
    parts.push(`<text x="${legendX + 16}" y="46">${xmlText(name)}</text>`);
    legendX += 28 + name.length * 7;
  }
  // Grid and ticks.
  const bottom = height - BOTTOM;
  for (const tick of x.ticks(6)) {
    const px = x(tick);
    parts.push(`<line x1="${px}" y1="${TOP - 6}" x2="${px}" y2="${bottom}" stroke="#e5e5e5"/>`);
    parts.push(`<text x="${px}" y="${bottom + 16}" text-anchor="middle" fill="#555">${tick}</text>`);
  }
  parts.push(
    `<text x="${(LABEL + WIDTH) / 2}" y="${bottom + 32}" text-anchor="middle" fill="#555">${xmlText(chart.unit)}</text>`,
  );
  for (const [row, group] of chart.groups.entries()) {
    const y0 = TOP + row * rowHeight;
    parts.push(
      `<text x="${LABEL - 8}" y="${y0 + (chart.series.length * BAR) / 2 + 4}" text-anchor="end">${xmlText(group.label)}</text>`,
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
