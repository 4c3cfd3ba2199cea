// The event stream (GET /api/events, authenticated by the session cookie), one per tab: a finished
// generation or a fine-tune's new status refreshes what shows it, without a reload.
import { useQueryClient } from '@tanstack/preact-query';
import { useEffect } from 'preact/hooks';

export function useLiveEvents(enabled: boolean): void {
  const client = useQueryClient();
  useEffect(() => {
    if (!enabled) return;
    const events = new EventSource('/api/events');
    events.addEventListener('media_generation_completed', (e) => {
      const { generation_id: id } = JSON.parse((e as MessageEvent<string>).data) as { generation_id: string };
      void client.invalidateQueries({ queryKey: ['generations'] });
      void client.invalidateQueries({ queryKey: ['generation', id] });
      void client.invalidateQueries({ queryKey: ['credits'] });
    });
    events.addEventListener('fine_tune.status', () => {
      for (const key of ['fine_tunes', 'checkpoints', 'fine_tune_logs']) void client.invalidateQueries({ queryKey: [key] });
    });
    return () => events.close();
  }, [enabled, client]);
}
