import { createParser, type EventSourceMessage } from 'eventsource-parser';

/** The events of a whole server-sent event stream, parsed as EventSource does (eventsource-parser). */
export function sseEvents(text: string): EventSourceMessage[] {
  const events: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (event) => events.push(event) });
  parser.feed(text);
  return events;
}

/** The JSON `data` of each event, without OpenAI's closing `[DONE]`. */
export function sseJson<T = Record<string, unknown>>(text: string): T[] {
  return sseEvents(text)
    .filter((e) => e.data !== '[DONE]')
    .map((e) => JSON.parse(e.data) as T);
}
