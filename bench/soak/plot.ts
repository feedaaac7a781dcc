// The soak's plot: docs/soak.svg (and docs/soak.png, through Chromium), from its samples. d3-scale gives
// the scales and their ticks ("nice" bounds, 1-2-5 steps), d3-shape the line paths; the SVG around them
// is assembled here. Run alone to plot samples again: pnpm --filter @herald/bench exec tsx soak/plot.ts
import { statSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { launchChromium } from '@herald/testing';
import { scaleLinear } from 'd3-scale';
import { line } from 'd3-shape';
import { readSamples, type Sample } from './samples.js';

/** Where a reported run's files go: its samples beside this file, its plot in docs/. */
export const REPORTED = {
  samples: fileURLToPath(new URL('./samples.csv', import.meta.url)),
  svg: fileURLToPath(new URL('../../docs/soak.svg', import.meta.url)),
  png: fileURLToPath(new URL('../../docs/soak.png', import.meta.url)),
};

const WIDTH = 960;
const PANEL = 190;
const MARGIN = { top: 78, right: 24, bottom: 44, left: 72, gap: 76 };
// Tableau 10's first colours: told apart by most readers, also in greyscale print.
const COLOURS = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#b07aa1'];

interface Series {
  label: string;
  values: number[];
}

interface Panel {
  title: string;
  series: Series[];
}

/** The panels: RSS per process, Redis memory, Redis keys, notifications per second. */
function panels(samples: readonly Sample[]): Panel[] {
  const mb = (bytes: number) => bytes / 2 ** 20;
  const processes = Object.keys(samples[0]?.rss ?? {});
  const rate = (pick: (s: Sample) => number) =>
    samples.map((s, i) => {
      const before = samples[i - 1];
      return before === undefined ? Number.NaN : (pick(s) - pick(before)) / (s.t - before.t);
    });
  return [
    {
      title: 'RSS per process, MB',
      series: processes.map((name) => ({ label: name, values: samples.map((s) => mb(s.rss[name] ?? 0)) })),
    },
    {
      title: 'Redis used_memory, MB',
      series: [
        { label: 'used_memory', values: samples.map((s) => mb(s.redisUsedMemory)) },
        {
          label: 'per-notification records (estimate)',
          values: samples.map((s) => mb(s.notificationRecordBytes)),
        },
        { label: 'completed jobs kept by BullMQ (estimate)', values: samples.map((s) => mb(s.keptJobBytes)) },
        {
          label: 'the rest',
          values: samples.map((s) => mb(s.redisUsedMemory - s.notificationRecordBytes - s.keptJobBytes)),
        },
      ],
    },
    {
      title: 'Redis keys, thousands',
      series: [
        { label: 'all (DBSIZE)', values: samples.map((s) => s.redisKeys / 1000) },
        {
          label: 'per-notification records (marker + id index)',
          values: samples.map((s) => s.notificationRecords / 1000),
        },
        {
          label: 'all other keys',
          values: samples.map((s) => (s.redisKeys - s.notificationRecords) / 1000),
        },
      ],
    },
    {
      title: 'Notifications per second (between samples)',
      series: [
        { label: 'accepted (202)', values: rate((s) => s.accepted) },
        { label: 'shown to clients', values: rate((s) => s.shown) },
      ],
    },
  ];
}

const xml = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** The plot of `samples` as an SVG document; the first `warmupS` seconds are shaded as warm-up. */
export function plotSvg(samples: readonly Sample[], options: { warmupS: number; title: string }): string {
  const list = panels(samples);
  const height = MARGIN.top + list.length * PANEL + (list.length - 1) * MARGIN.gap + MARGIN.bottom;
  const times = samples.map((s) => s.t);
  const x = scaleLinear()
    .domain([0, Math.max(60, ...times)])
    .range([MARGIN.left, WIDTH - MARGIN.right]);
  // A tick every minute from 4 minutes on (d3's 1-2-5 steps would give 50 s), else d3's in seconds.
  const span = x.domain()[1] ?? 0;
  const inMinutes = span >= 240;
  const xTicks = inMinutes
    ? Array.from({ length: Math.floor(span / 60) + 1 }, (_, i) => i * 60)
    : x.ticks(10);
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" role="img" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="system-ui, -apple-system, 'Segoe UI', sans-serif" font-size="12">`,
    // The accessible name (screen readers, and Biome's noSvgWithoutTitle).
    `<title>${xml(options.title)}: ${list.map((panel) => xml(panel.title)).join('; ')}</title>`,
    `<rect width="${WIDTH}" height="${height}" fill="#fff"/>`,
    `<text x="${MARGIN.left}" y="24" font-size="16" font-weight="600">${xml(options.title)}</text>`,
  ];
  list.forEach((panel, p) => {
    const top = MARGIN.top + p * (PANEL + MARGIN.gap);
    const bottom = top + PANEL;
    const finite = panel.series.flatMap((s) => s.values).filter(Number.isFinite);
    const y = scaleLinear()
      .domain([0, Math.max(1e-9, ...finite) * 1.08])
      .nice(5)
      .range([bottom, top]);
    const format = y.tickFormat(5);
    parts.push(
      `<text x="${MARGIN.left}" y="${top - 26}" font-size="13" font-weight="600">${xml(panel.title)}</text>`,
    );
    // Legend, one swatch per series, on the line under the title.
    let legendX = MARGIN.left;
    panel.series.forEach((series, i) => {
      const colour = COLOURS[i % COLOURS.length];
      parts.push(
        `<rect x="${legendX}" y="${top - 17}" width="14" height="4" fill="${colour}"/>`,
        `<text x="${legendX + 19}" y="${top - 11}" fill="#333">${xml(series.label)}</text>`,
      );
      legendX += 19 + series.label.length * 6.6 + 22;
    });
    parts.push(
      `<rect x="${x(0)}" y="${top}" width="${Math.max(0, x(options.warmupS) - x(0))}" height="${PANEL}" fill="#ececec"/>`,
    );
    if (p === 0)
      parts.push(
        `<text x="${x(options.warmupS) - 6}" y="${top + 14}" text-anchor="end" fill="#777">warm-up</text>`,
      );
    for (const tick of y.ticks(5)) {
      parts.push(
        `<line x1="${MARGIN.left}" x2="${WIDTH - MARGIN.right}" y1="${y(tick)}" y2="${y(tick)}" stroke="#e3e3e3"/>`,
        `<text x="${MARGIN.left - 8}" y="${y(tick) + 4}" text-anchor="end" fill="#555">${format(tick)}</text>`,
      );
    }
    for (const tick of xTicks) {
      parts.push(
        `<line x1="${x(tick)}" x2="${x(tick)}" y1="${bottom}" y2="${bottom + 5}" stroke="#999"/>`,
        `<text x="${x(tick)}" y="${bottom + 18}" text-anchor="middle" fill="#555">${inMinutes ? `${tick / 60} min` : `${tick} s`}</text>`,
      );
    }
    parts.push(
      `<line x1="${MARGIN.left}" x2="${WIDTH - MARGIN.right}" y1="${bottom}" y2="${bottom}" stroke="#999"/>`,
    );
    panel.series.forEach((series, i) => {
      const path = line<number>()
        .defined((value) => Number.isFinite(value))
        .x((_, k) => x(times[k] ?? 0))
        .y((value) => y(value))(series.values);
      if (path)
        parts.push(
          `<path d="${path}" fill="none" stroke="${COLOURS[i % COLOURS.length]}" stroke-width="2" stroke-linejoin="round"/>`,
        );
    });
  });
  parts.push(
    `<text x="${WIDTH - MARGIN.right}" y="${height - 10}" text-anchor="end" fill="#555">time since the load started</text>`,
    '</svg>',
  );
  return `${parts.join('\n')}\n`;
}

/** Writes the SVG, and the PNG through Chromium when there is one (else says so). */
export async function writePlot(svg: string, files: { svg: string; png: string } = REPORTED): Promise<void> {
  writeFileSync(files.svg, svg);
  try {
    const browser = await launchChromium();
    try {
      const page = await browser.newPage({ viewport: { width: WIDTH, height: 600 }, deviceScaleFactor: 1 });
      await page.setContent(`<body style="margin:0">${svg}</body>`);
      await page.locator('svg').screenshot({ path: files.png });
    } finally {
      await browser.close();
    }
  } catch (error) {
    process.stderr.write(`[soak] no PNG: ${(error as Error).message}\n`);
  }
}

/** The plot's title: what ran, and when. */
export function soakTitle(run: { perSecond: number; ms: number; users: number; at: Date }): string {
  return `Herald soak: ${run.perSecond}/s for ${run.ms / 60_000} min, ${run.users} clients (${run.at.toISOString().slice(0, 10)})`;
}

// Run alone: the samples file plotted again, with the run's settings from the same variables run.ts reads.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const env = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
  const samples = readSamples(REPORTED.samples);
  const title = soakTitle({
    perSecond: env('SOAK_PER_SECOND', 150),
    ms: env('SOAK_MS', 600_000),
    users: env('SOAK_USERS', 200),
    at: statSync(REPORTED.samples).mtime,
  });
  await writePlot(plotSvg(samples, { warmupS: env('SOAK_WARMUP_MS', 120_000) / 1000, title }));
}
