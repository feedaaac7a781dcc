import type { AdminSnapshot, ErrorResponse } from '@herald/protocol';
import { EventSourceParserStream } from 'eventsource-parser/stream';

/** Where the gateway is, seen from the page: the web server proxies `/api/*` to it. */
export const API = '/api';

/** The admin key is kept for this tab's session only (never localStorage, never a cookie). */
export const KEY_STORAGE = 'herald-admin-key';

/** Where the stream is: connecting, receiving, waiting to reconnect, or refused for good. */
export type StreamState =
  | { kind: 'connecting' }
  | { kind: 'live' }
  | { kind: 'reconnecting'; reason: string; inMs: number }
  | { kind: 'refused'; status: number; code: string; message: string };

/** An answer of the admin API that was not a success. */
export class AdminApiError extends Error {
  readonly status: number;
  readonly code: string;
  constructor(status: number, body: Partial<ErrorResponse>) {
    super(body.error ?? `The gateway answered ${status}`);
    this.name = 'AdminApiError';
    this.status = status;
    this.code = body.code ?? 'HERALD_ERR_INTERNAL';
  }
}

async function refusal(response: Response): Promise<AdminApiError> {
  const body = (await response.json().catch(() => ({}))) as Partial<ErrorResponse>;
  return new AdminApiError(response.status, body);
}

/**
 * 401 (not the admin key), 404 (the admin API is off) and 431 (a key too long for any header) do not
 * get better by retrying.
 */
const isFinal = (status: number) => status === 401 || status === 404 || status === 431;

/** Longest key sent: HERALD_ADMIN_KEY is 32+ random bytes, and a header of more is refused anyway. */
const KEY_MAX_LENGTH = 1024;

/**
 * Why `key` cannot be the admin key, before it is sent: characters no key has and an HTTP header cannot
 * carry (`fetch` throws on those, which read as a network error, retried for ever), or a length no key
 * has (the gateway answers 431).
 */
export function keyProblem(key: string): string | undefined {
  if (/[^\x21-\x7e]/.test(key))
    return 'Not the admin key: it has a character no key has (a space, a line break, a letter outside ASCII).';
  if (key.length > KEY_MAX_LENGTH) return `Not the admin key: it is ${key.length} characters long.`;
  return undefined;
}

/**
 * Reads `GET /admin/stream` (Server-Sent Events, one snapshot a second) with the admin key in the
 * `Authorization` header (which `EventSource` cannot send: `fetch` with a streamed body instead), and
 * reconnects with backoff (1 s doubling to 10 s) until `signal` aborts or the key is refused.
 */
export async function streamSnapshots(
  key: string,
  onSnapshot: (snapshot: AdminSnapshot) => void,
  onState: (state: StreamState) => void,
  signal: AbortSignal,
): Promise<void> {
  const problem = keyProblem(key);
  if (problem !== undefined) {
    onState({ kind: 'refused', status: 401, code: 'HERALD_ERR_UNAUTHORIZED', message: problem });
    return;
  }
  let backoffMs = 1000;
  while (!signal.aborted) {
    onState({ kind: 'connecting' });
    let reason: string;
    try {
      const response = await fetch(`${API}/admin/stream`, {
        headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream' },
        cache: 'no-store',
        signal,
      });
      if (!response.ok || !response.body) {
        const error = await refusal(response);
        if (isFinal(error.status)) {
          onState({ kind: 'refused', status: error.status, code: error.code, message: error.message });
          return;
        }
        throw error;
      }
      const events = response.body
        .pipeThrough(new TextDecoderStream())
        .pipeThrough(new EventSourceParserStream())
        .getReader();
      for (;;) {
        const { value, done } = await events.read();
        if (done) break;
        if (value.event !== 'snapshot') continue;
        onSnapshot(JSON.parse(value.data) as AdminSnapshot);
        onState({ kind: 'live' });
        backoffMs = 1000;
      }
      reason = 'the stream ended';
    } catch (error) {
      if (signal.aborted) return;
      reason = (error as Error).message;
    }
    onState({ kind: 'reconnecting', reason, inMs: backoffMs });
    await new Promise((resolve) => setTimeout(resolve, backoffMs));
    backoffMs = Math.min(10_000, backoffMs * 2);
  }
}

/** `POST /admin/failed/:id/retry`: resolves when the notification is back in the queue. */
export async function retryFailed(key: string, id: string): Promise<void> {
  const response = await fetch(`${API}/admin/failed/${encodeURIComponent(id)}/retry`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}` },
  });
  if (!response.ok) throw await refusal(response);
}
