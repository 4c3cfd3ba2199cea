import { describeError } from '../api';
import { html } from '../html';

export function ErrorNote(props: { error: unknown }) {
  if (!props.error) return null;
  return html`<p class="error" role="alert">${describeError(props.error)}</p>`;
}

export const Loading = () => html`<p class="muted" aria-live="polite">Loading…</p>`;

export function StatusBadge(props: { status: string }) {
  return html`<span class=${`badge ${props.status}`}>${props.status}</span>`;
}
