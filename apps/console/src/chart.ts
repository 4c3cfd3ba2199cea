// A time series with uPlot (about 50 KB before gzip): one line per series, hover legend.
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { html } from './html';

const COLORS = ['#1f6feb', '#d1242f', '#1a7f37', '#9a6700', '#8250df', '#bf3989', '#0969da', '#57606a'];

export interface Series {
  label: string;
  values: (number | null)[];
}

export function TimeChart(props: { title: string; xs: number[]; series: Series[]; xLabel?: string; time?: boolean; testId?: string; xRange?: [number, number] }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (!box.current) return;
    const width = Math.max(280, box.current.clientWidth);
    const plot = new uPlot(
      {
        width,
        height: 220,
        scales: { x: { time: props.time ?? true, ...(props.xRange && { range: props.xRange }) } },
        axes: [{ label: props.xLabel }, {}],
        series: [{}, ...props.series.map((s, i) => ({ label: s.label, stroke: COLORS[i % COLORS.length], width: 2, spanGaps: true }))],
      },
      [props.xs, ...props.series.map((s) => s.values)],
      box.current,
    );
    const onResize = () => plot.setSize({ width: Math.max(280, box.current?.clientWidth ?? width), height: 220 });
    addEventListener('resize', onResize);
    return () => {
      removeEventListener('resize', onResize);
      plot.destroy();
    };
  }, [JSON.stringify([props.xs, props.series, props.xRange])]);
  return html`<figure class="chart" data-testid=${props.testId}>
    <figcaption>${props.title}</figcaption>
    <div ref=${box} role="img" aria-label=${`${props.title}: ${props.series.map((s) => s.label).join(', ')}`}></div>
  </figure>`;
}
