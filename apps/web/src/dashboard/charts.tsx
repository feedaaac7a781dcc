import type { AdminSnapshot } from '@herald/protocol';
import { useEffect, useRef } from 'preact/hooks';
import uPlot, { type AlignedData, type Options } from 'uplot';
import type { TokenHistory } from './history.js';

/** Series colours that read on light and dark backgrounds alike. */
const PALETTE = ['#d9480f', '#1c7ed6', '#7048e8', '#2b8a3e', '#c2255c'];
const ALLOWED = '#2b8a3e';
const DENIED = '#c92a2a';

const HEIGHT = 220;

/** The time axis as clock times (`11:45:40`), not uPlot's default two-line date labels. */
const clock = new Intl.DateTimeFormat(undefined, {
  hour: '2-digit',
  minute: '2-digit',
  second: '2-digit',
  hourCycle: 'h23',
});
const TIME_AXIS = {
  // At least 80 px between ticks: labels never overlap, whatever the width.
  space: 80,
  values: (_u: uPlot, splits: number[]) => splits.map((second) => clock.format(second * 1000)),
};

/**
 * A uPlot chart (uPlot: a 50 KB canvas time-series library, the "small chart library" of the issue)
 * that follows its container's width. The chart is rebuilt when `shape` changes (another set of
 * series), and only given new data otherwise.
 */
function Chart(props: {
  title: string;
  shape: string;
  options: Omit<Options, 'width' | 'height'>;
  data: AlignedData;
}) {
  const host = useRef<HTMLDivElement>(null);
  const chart = useRef<uPlot | null>(null);
  const { shape, options, data } = props;

  // Rebuilt for another shape only (options and data are new objects every second); data follows below.
  useEffect(() => {
    const element = host.current;
    if (!element) return;
    const plot = new uPlot({ ...options, width: element.clientWidth || 600, height: HEIGHT }, data, element);
    chart.current = plot;
    const resize = new ResizeObserver(() => plot.setSize({ width: element.clientWidth, height: HEIGHT }));
    resize.observe(element);
    return () => {
      resize.disconnect();
      plot.destroy();
      chart.current = null;
    };
  }, [shape]);

  useEffect(() => {
    chart.current?.setData(data);
  }, [data]);

  return <div class="chart" ref={host} role="img" aria-label={props.title} />;
}

/** Allowed vs denied rate-limit decisions per second, every gateway summed. */
export function TrafficChart({ traffic }: { traffic: AdminSnapshot['traffic'] }) {
  return (
    <Chart
      title="Rate-limit decisions per second: allowed and denied"
      shape="traffic"
      options={{
        scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(5, max)] } },
        axes: [TIME_AXIS, { label: 'decisions / s' }],
        series: [
          {},
          { label: 'allowed', stroke: ALLOWED, fill: `${ALLOWED}33`, width: 2 },
          { label: 'denied', stroke: DENIED, fill: `${DENIED}33`, width: 2 },
        ],
      }}
      data={[traffic.seconds, traffic.allowed, traffic.denied]}
    />
  );
}

/** The hot users' token levels over the last minute: a drained bucket is a user being flooded. */
export function TokenChart({ history }: { history: TokenHistory }) {
  const labels = [...history.levels.keys()];
  const ceiling = Math.max(1, ...history.limits.values());
  return (
    <Chart
      title="Token levels of the hottest rate-limited users"
      shape={`tokens:${labels.join('\u0000')}`}
      options={{
        scales: { x: { time: true }, y: { range: [0, ceiling] } },
        axes: [TIME_AXIS, { label: 'tokens left' }],
        series: [
          {},
          ...labels.map((label, index) => ({
            label,
            stroke: PALETTE[index % PALETTE.length] as string,
            width: 2,
            spanGaps: false,
          })),
        ],
      }}
      data={[history.seconds, ...labels.map((label) => history.levels.get(label) ?? [])] as AlignedData}
    />
  );
}
