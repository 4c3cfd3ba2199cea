import { useMutation, useQueryClient } from '@tanstack/preact-query';
import { api, ApiFailure } from './api';
import { html } from './html';
import { FineTunesPage } from './pages/fine-tunes';
import { GenerationsPage } from './pages/generations';
import { KeysPage } from './pages/keys';
import { LearningPage } from './pages/learning';
import { ModelsPage } from './pages/models';
import { OperatorPage } from './pages/operator';
import { OverviewPage } from './pages/overview';
import { ErrorNote, Loading } from './pages/parts';
import { PlaygroundPage } from './pages/playground';
import { SignInPage } from './pages/sign-in';
import { useLiveEvents } from './live-events';
import { useSession, type Session } from './queries';
import { navigate, usePage } from './router';

interface PageDef {
  id: string;
  label: string;
  view: (props: { session: Session }) => unknown;
  /** Shown when the session can use it: key pages need a key, operator pages the admin token. */
  shown: (s: Session) => boolean;
}

const withKey = (s: Session) => s.key_prefix !== null;
const PAGES: PageDef[] = [
  { id: 'overview', label: 'Overview', view: OverviewPage, shown: withKey },
  { id: 'generations', label: 'Generations', view: GenerationsPage, shown: withKey },
  { id: 'playground', label: 'Playground', view: PlaygroundPage, shown: withKey },
  { id: 'keys', label: 'API keys', view: KeysPage, shown: (s) => withKey(s) && s.scopes.length === 0 },
  { id: 'fine-tunes', label: 'Fine-tunes', view: FineTunesPage, shown: withKey },
  { id: 'learning', label: 'Learning', view: LearningPage, shown: withKey },
  { id: 'models', label: 'Models', view: ModelsPage, shown: withKey },
  { id: 'operator', label: 'Operator', view: OperatorPage, shown: (s) => s.operator },
];

export function App() {
  const session = useSession();
  const page = usePage();
  const client = useQueryClient();
  // A key limited to other scopes may not open the stream (403): it is not asked.
  useLiveEvents(!!session.data?.key_prefix && (session.data.scopes.length === 0 || session.data.scopes.includes('events')));
  const signOut = useMutation({ mutationFn: () => api('DELETE', '/api/console/session'), onSettled: () => client.resetQueries() });
  if (session.isLoading) return html`<${Loading} />`;
  if (session.error instanceof ApiFailure && session.error.status === 401) return html`<${SignInPage} />`;
  if (!session.data) return html`<main id="main"><${ErrorNote} error=${session.error} /></main>`;
  const pages = PAGES.filter((p) => p.shown(session.data));
  const current = pages.find((p) => p.id === page) ?? pages[0];
  return html`<div class="shell">
    <a class="skip" href="#main">Skip to content</a>
    <header>
      <strong class="brand">atelier</strong>
      <nav aria-label="Console">
        <ul>
          ${pages.map(
            (p) => html`<li><a href=${`/console/${p.id}`} aria-current=${p.id === current?.id ? 'page' : undefined}
              onClick=${(e: MouseEvent) => (e.preventDefault(), navigate(p.id))}>${p.label}</a></li>`,
          )}
        </ul>
      </nav>
      <span class="who">${session.data.username ?? 'operator'}${session.data.namespace && session.data.namespace !== session.data.username ? ` · ${session.data.namespace}` : ''}</span>
      <button type="button" onClick=${() => signOut.mutate()}>Sign out</button>
    </header>
    <main id="main" tabindex="-1">${current ? html`<${current.view} session=${session.data} />` : html`<p>Nothing to show for this session.</p>`}</main>
  </div>`;
}
