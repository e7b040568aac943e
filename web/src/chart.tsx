// The time chart (uPlot): sends, opens, replies and bounces per bucket, the same colours as the
// state pills. A table of the same numbers follows for screen readers and exact values.
import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

export interface TimelinePoint {
  t: string;
  sent: number;
  opened?: number;
  replied: number;
  bounced: number;
}

const SERIES = [
  ['sent', '--chart-sent'],
  ['opened', '--chart-opened'],
  ['replied', '--chart-replied'],
  ['bounced', '--chart-bounced'],
] as const;

function cssVar(name: string): string {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || '#888';
}

/**
 * Counts theme changes: the picker's (`data-theme` on the root) and the system's (light/dark,
 * followed while the picker says "system"). The canvas is drawn with the colours read when it
 * was drawn, so it is drawn again on each change.
 */
function useThemeChanges(): number {
  const [changes, setChanges] = useState(0);
  useEffect(() => {
    const bump = () => setChanges((n) => n + 1);
    const attr = new MutationObserver(bump);
    attr.observe(document.documentElement, { attributes: true, attributeFilter: ['data-theme'] });
    const scheme = window.matchMedia('(prefers-color-scheme: dark)');
    scheme.addEventListener('change', bump);
    return () => {
      attr.disconnect();
      scheme.removeEventListener('change', bump);
    };
  }, []);
  return changes;
}

/** `period`: the span the points cover, said before the totals ("the last 48 hours"). */
export function TimelineChart({ points, label, period }: { points: TimelinePoint[]; label: string; period: string }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const theme = useThemeChanges();

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const data: uPlot.AlignedData = [points.map((p) => new Date(p.t).getTime() / 1000), ...SERIES.map(([k]) => points.map((p) => p[k] ?? 0))];
    const axis = { stroke: cssVar('--muted'), grid: { stroke: cssVar('--line'), width: 1 }, ticks: { stroke: cssVar('--line') } };
    const opts: uPlot.Options = {
      width: Math.max(300, el.clientWidth),
      height: 240,
      legend: { show: false },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true } },
      axes: [axis, axis],
      series: [{}, ...SERIES.map(([k, v]) => ({ label: k, stroke: cssVar(v), width: 2, points: { show: points.length < 50 } }))],
    };
    plot.current?.destroy();
    plot.current = new uPlot(opts, data, el);
    const ro = new ResizeObserver(() => plot.current?.setSize({ width: Math.max(300, el.clientWidth), height: 240 }));
    ro.observe(el);
    return () => {
      ro.disconnect();
      plot.current?.destroy();
      plot.current = null;
    };
  }, [points, theme]);

  const totals = SERIES.map(([k]) => points.reduce((s, p) => s + (p[k] ?? 0), 0));
  return (
    <figure class="chart-figure">
      <div class="legend" aria-hidden="true">
        <span class="muted">In {period}:</span>
        {SERIES.map(([k], i) => (
          <span key={k}>
            <span class={`swatch sw-${k}`} />
            {k} {totals[i].toLocaleString('en')}
          </span>
        ))}
      </div>
      <div ref={box} class="chart" role="img" aria-label={`${label}: ${SERIES.map(([k], i) => `${totals[i]} ${k}`).join(', ')} in ${period}`} />
      <details>
        <summary>The numbers</summary>
        <div class="table-wrap">
          <table>
            <caption class="sr-only">{label}</caption>
            <thead>
              <tr>
                <th scope="col">time (UTC)</th>
                {SERIES.map(([k]) => (
                  <th scope="col" class="num" key={k}>
                    {k}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {points
                .filter((p) => SERIES.some(([k]) => p[k]))
                .map((p) => (
                  <tr key={p.t}>
                    <td>{p.t.replace('T', ' ').replace(/:00(\.000)?Z$/, '')}</td>
                    {SERIES.map(([k]) => (
                      <td class="num" key={k}>
                        {p[k] ?? 0}
                      </td>
                    ))}
                  </tr>
                ))}
            </tbody>
          </table>
        </div>
      </details>
    </figure>
  );
}
