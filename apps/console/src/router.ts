// Paths under /console/ with the History API; the gateway serves index.html for every one of them.
import { useEffect, useState } from 'preact/hooks';

const BASE = '/console';

export function currentPage(): string {
  const rest = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) : '/';
  return rest.replace(/^\/+/, '').split('/')[0] || 'overview';
}

export function navigate(page: string): void {
  history.pushState(null, '', `${BASE}/${page}`);
  dispatchEvent(new PopStateEvent('popstate'));
}

export function usePage(): string {
  const [page, setPage] = useState(currentPage);
  useEffect(() => {
    const onPop = () => setPage(currentPage());
    addEventListener('popstate', onPop);
    return () => removeEventListener('popstate', onPop);
  }, []);
  return page;
}
