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

/** Per split (model or key): its requests and credits over the window, from a day × split report. */
function totalsBySplit(usage: Usage | undefined): { name: string; requests: number; cost: number }[] {
  const by = new Map<string, { name: string; requests: number; cost: number }>();
  for (const r of usage?.rows ?? []) {
    const name = r.split ?? '(unattributed)';
    const t = by.get(name) ?? { name, requests: 0, cost: 0 };
    t.requests += r.requests;
    t.cost += Number(r.cost);
    by.set(name, t);
  }
  return [...by.values()].sort((a, b) => b.cost - a.cost);
}

/** One line per model (or key): credits per UTC day, zero on days without a charge, so each spans the window. */
function seriesBySplit(usage: Usage | undefined, xs: number[]) {
  const cost = new Map<string, Map<string, number>>();
  for (const r of usage?.rows ?? []) {
    if (r.group === null) continue;
    const name = r.split ?? '(unattributed)';
    if (!cost.has(name)) cost.set(name, new Map());
    cost.get(name)!.set(r.group, Number(r.cost));
  }
  return [...cost.entries()].map(([label, days]) => ({ label, values: xs.map((x) => days.get(new Date(x * 1000).toISOString().slice(0, 10)) ?? 0) }));
}

function Breakdown(props: { title: string; heading: string; usage: Usage | undefined; testId: string }) {
  const rows = totalsBySplit(props.usage);
  const max = Math.max(0, ...rows.map((r) => r.cost));
  return html`<section class="card" data-testid=${props.testId}>
    <h3>${props.title}</h3>
    ${rows.length === 0
      ? html`<p class="muted">Nothing charged in this window.</p>`
      : html`<table>
          <thead><tr><th scope="col">${props.heading}</th><th scope="col">Requests</th><th scope="col">Credits</th></tr></thead>
          <tbody>
            ${rows.map(
              (r) => html`<tr>
                <td>${r.name}</td>
                <td class="num">${r.requests}</td>
                <td class="num"><span class="bar" style=${{ width: `${max > 0 ? (100 * r.cost) / max : 0}%` }} aria-hidden="true"></span><span class="val">${credits(r.cost)}</span></td>
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
  // Two requests: every (day, model) and every (day, key) of the window; totals, lines and tables come from them.
  const byModel = useUsage(from, 'day', 'model');
  const byKey = useUsage(from, 'day', 'api_key');
  const xs: number[] = [];
  for (let day = Math.floor(Date.parse(from) / 86_400_000) * 86_400; day <= Date.now() / 1000; day += 86_400) xs.push(day);
  // The chart spans the whole window, whatever days had usage.
  const xRange: [number, number] = [Date.parse(from) / 1000 - 43_200, Date.now() / 1000 + 43_200];
  const total = byModel.data?.total;
  return html`<div>
    <h2>Overview</h2>
    <div class="row">
      <section class="card stat"><h3>Credits available</h3><p class="big" data-testid="credits">${balance.data ? credits(balance.data.available as string) : '…'}</p></section>
      <section class="card stat"><h3>Spent</h3><p class="big" data-testid="usage-total-cost">${total ? credits(total.cost) : '…'}</p></section>
      <section class="card stat"><h3>Requests</h3><p class="big" data-testid="usage-total-requests">${total ? total.requests : '…'}</p></section>
    </div>
    <div class="toolbar" role="group" aria-label="Time window">
      ${RANGES.map((r) => html`<button type="button" aria-pressed=${r.id === range.id} onClick=${() => setRange(r)}>${r.label}</button>`)}
      <a class="button" href=${`/api/usage?from=${encodeURIComponent(from)}&group_by=day&split_by=model&format=csv`} download="usage.csv">Download CSV</a>
    </div>
    <${ErrorNote} error=${byModel.error ?? byKey.error ?? balance.error} />
    ${byModel.isLoading || byKey.isLoading
      ? html`<${Loading} />`
      : html`<div class="row">
          <section class="card wide"><${TimeChart} title="Credits per day, by model" xs=${xs} series=${seriesBySplit(byModel.data, xs)} xRange=${xRange} testId="chart-cost" /></section>
          <section class="card wide"><${TimeChart} title="Credits per day, by API key" xs=${xs} series=${seriesBySplit(byKey.data, xs)} xRange=${xRange} testId="chart-keys" /></section>
        </div>`}
    <div class="row">
      <${Breakdown} title="By model" heading="Model" usage=${byModel.data} testId="usage-by-model" />
      <${Breakdown} title="By API key" heading="Key" usage=${byKey.data} testId="usage-by-key" />
    </div>
  </div>`;
}
