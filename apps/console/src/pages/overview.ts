import { useState } from 'preact/hooks';
import { TimeChart } from '../chart';
import { credits } from '../format';
import { html } from '../html';
import { useCredits, useUsage, type Usage } from '../queries';
import { ErrorNote, Loading } from './parts';

const RANGES = [
  { id: '24h', label: 'Last 24 h', hours: 24 },
  { id: '7d', label: 'Last 7 days', hours: 24 * 7 },
  { id: '30d', label: 'Last 30 days', hours: 24 * 30 },
];

/** The window's start, at the hour, so the query key (and the API's answer) stays put while the page is open. */
function since(hours: number): string {
  const d = new Date(Date.now() - hours * 3_600_000);
  d.setUTCMinutes(0, 0, 0);
  return d.toISOString();
}

function Breakdown(props: { title: string; usage: Usage | undefined; testId: string }) {
  const rows = props.usage?.rows ?? [];
  const max = Math.max(0, ...rows.map((r) => Number(r.cost)));
  return html`<section class="card" data-testid=${props.testId}>
    <h3>${props.title}</h3>
    ${rows.length === 0
      ? html`<p class="muted">Nothing charged in this window.</p>`
      : html`<table>
          <thead><tr><th scope="col">${props.usage?.group_by === 'model' ? 'Model' : 'Key'}</th><th scope="col">Requests</th><th scope="col">Credits</th></tr></thead>
          <tbody>
            ${rows.map(
              (r) => html`<tr>
                <td>${r.group ?? '(unattributed)'}</td>
                <td class="num">${r.requests}</td>
                <td class="num"><span class="bar" style=${{ width: `${max > 0 ? (100 * Number(r.cost)) / max : 0}%` }} aria-hidden="true"></span><span class="val">${credits(r.cost)}</span></td>
              </tr>`,
            )}
          </tbody>
        </table>`}
  </section>`;
}

export function OverviewPage() {
  const [range, setRange] = useState(RANGES[1]);
  const from = since(range.hours);
  const balance = useCredits();
  const byDay = useUsage(from, 'day');
  const byModel = useUsage(from, 'model');
  const byKey = useUsage(from, 'api_key');
  // Every UTC day of the window, zero where nothing was charged, so the line spans it.
  const rows = new Map((byDay.data?.rows ?? []).filter((r) => r.group !== null).map((r) => [r.group!, r]));
  const xs: number[] = [];
  for (let day = Math.floor(Date.parse(from) / 86_400_000) * 86_400; day <= Date.now() / 1000; day += 86_400) xs.push(day);
  const dayOf = (x: number) => rows.get(new Date(x * 1000).toISOString().slice(0, 10));
  const total = byDay.data?.total;
  // The chart spans the whole window, whatever days had usage.
  const xRange: [number, number] = [Date.parse(from) / 1000 - 43_200, Date.now() / 1000 + 43_200];
  return html`<div>
    <h2>Overview</h2>
    <div class="row">
      <section class="card stat"><h3>Credits available</h3><p class="big" data-testid="credits">${balance.data ? credits(balance.data.available as string) : '…'}</p></section>
      <section class="card stat"><h3>Spent</h3><p class="big" data-testid="usage-total-cost">${total ? credits(total.cost) : '…'}</p></section>
      <section class="card stat"><h3>Requests</h3><p class="big" data-testid="usage-total-requests">${total ? total.requests : '…'}</p></section>
    </div>
    <div class="toolbar" role="group" aria-label="Time window">
      ${RANGES.map((r) => html`<button type="button" aria-pressed=${r.id === range.id} onClick=${() => setRange(r)}>${r.label}</button>`)}
      <a class="button" href=${`/api/usage?from=${encodeURIComponent(from)}&group_by=day&format=csv`} download="usage.csv">Download CSV</a>
    </div>
    <${ErrorNote} error=${byDay.error ?? byModel.error ?? byKey.error ?? balance.error} />
    ${byDay.isLoading
      ? html`<${Loading} />`
      : html`<div class="row">
          <section class="card wide"><${TimeChart} title="Credits spent per day" xs=${xs} series=${[{ label: 'credits', values: xs.map((x) => Number(dayOf(x)?.cost ?? 0)) }]} xRange=${xRange} testId="chart-cost" /></section>
          <section class="card wide"><${TimeChart} title="Requests per day" xs=${xs} series=${[{ label: 'requests', values: xs.map((x) => dayOf(x)?.requests ?? 0) }]} xRange=${xRange} testId="chart-requests" /></section>
        </div>`}
    <div class="row">
      <${Breakdown} title="By model" usage=${byModel.data} testId="usage-by-model" />
      <${Breakdown} title="By API key" usage=${byKey.data} testId="usage-by-key" />
    </div>
  </div>`;
}
