import type {
  BatchAccepted,
  InboxListPage,
  InboxOffset,
  NotificationStatus,
  NotifyAccepted,
  NotifyRequest,
  TokenResponse,
  UnreadEvent,
} from '@herald/protocol';

/** Settings of {@link createHeraldServer}. */
export interface HeraldServerOptions {
  /** The gateway, e.g. `http://localhost:3000`. */
  url: string;
  /**
   * An API key (`HERALD_API_KEYS` or `herald keys create`): keep it on your backend, never in a browser.
   * `undefined` is accepted by the type so that `process.env.HERALD_API_KEY` can be passed as it is, and
   * refused at once (`HERALD_ERR_VALIDATION`), before any request, when the variable is unset.
   */
  apiKey: string | undefined;
  /** Retries after a 503, a 429, a 409 in flight or a network error (default 3). */
  retries?: number;
  /** The longest wait for a retry (ms, default 10 000): a `Retry-After` beyond it is thrown instead. */
  maxRetryDelayMs?: number;
  /** Per-attempt timeout (ms, default 10 000), until the whole answer, body included, has arrived. */
  timeoutMs?: number;
  /** `fetch` to use (default the global one). */
  fetch?: typeof fetch;
}

/** A notification to send; `idempotencyKey` is generated when absent (retries never send twice). */
export type NotifyInput = NotifyRequest & { idempotencyKey?: string };

/** `POST /notify`'s answer, with whether it was a replay of an earlier request with the same key. */
export interface NotifyResult extends NotifyAccepted {
  idempotencyKey: string;
  /** True: the gateway had already accepted this key (`Idempotency-Replayed`); nothing was enqueued twice. */
  replayed: boolean;
}

/**
 * An answer other than 2xx, with the gateway's stable `code` (`HERALD_ERR_…`), or a network failure
 * (`HERALD_ERR_NETWORK`) that outlived the retries.
 */
export class HeraldApiError extends Error {
  readonly code: string;
  /** HTTP status; 0 for a network failure, or options refused before any request (`HERALD_ERR_VALIDATION`). */
  readonly status: number;
  readonly details: unknown;
  /** From `Retry-After` (or `retryAfterMs` in the body) when the gateway gave one. */
  readonly retryAfterMs: number | undefined;
  /**
   * True when a send may have been accepted: a 503 whose enqueue may have reached Redis, a 409 with
   * the key still in flight, or any error of a send one of whose attempts got no answer (a network
   * failure mid-send): retry with the same `idempotencyKey`, which never enqueues twice.
   */
  readonly maybeAccepted: boolean;
  readonly idempotencyKey: string | undefined;

  constructor(
    code: string,
    message: string,
    options: {
      status: number;
      details?: unknown;
      retryAfterMs?: number | undefined;
      maybeAccepted?: boolean;
      idempotencyKey?: string | undefined;
      cause?: unknown;
    },
  ) {
    super(message, { cause: options.cause });
    this.name = 'HeraldApiError';
    this.code = code;
    this.status = options.status;
    this.details = options.details;
    this.retryAfterMs = options.retryAfterMs;
    this.maybeAccepted = options.maybeAccepted ?? false;
    this.idempotencyKey = options.idempotencyKey;
  }
}

/** Herald's HTTP API for a backend: see {@link createHeraldServer}. */
export interface HeraldServer {
  notify(notification: NotifyInput): Promise<NotifyResult>;
  /** Up to 100 notifications in one request; each is validated alone (see `results`). */
  notifyBatch(
    notifications: NotifyRequest[],
    options?: { idempotencyKey?: string },
  ): Promise<BatchAccepted & { idempotencyKey: string; replayed: boolean }>;
  /** A user token for `userId`, to hand to that user's browser (`createHeraldClient`'s `getToken`). */
  /** `topics`: those the user may subscribe to themselves (the browser SDK's `subscribeTopic`). */
  createToken(userId: string, options?: { topics?: string[] }): Promise<TokenResponse>;
  /**
   * What became of a notification; undefined when the gateway does not know it (its 404
   * `HERALD_ERR_NOT_FOUND`). Any other 404 (a `url` whose path the gateway does not serve, a proxy's
   * page) is a {@link HeraldApiError}.
   */
  status(id: string): Promise<NotificationStatus | undefined>;
  inbox: {
    /** A page, oldest first; backwards (the newest, then `nextBefore`) with `newest` or `before`. */
    list(
      userId: string,
      options?: { after?: InboxOffset; before?: InboxOffset; newest?: boolean; limit?: number },
    ): Promise<InboxListPage>;
    markRead(
      userId: string,
      selection: { ids: string[] } | { all: true; upTo?: InboxOffset },
    ): Promise<{ changed: number; unread: UnreadEvent }>;
  };
}

/**
 * A client of Herald's gateway for backends (Node ≥ 20, or anything with `fetch`). Every send carries an
 * `Idempotency-Key` (yours, or a random UUID), so its retries (503 `Retry-After`, 429 `Retry-After`,
 * 409 in flight, network errors) never enqueue twice; failures are {@link HeraldApiError}s with the
 * gateway's `code`.
 *
 * @example
 * ```ts
 * import { createHeraldServer } from '@herald/client/server';
 * const herald = createHeraldServer({ url: 'http://localhost:3000', apiKey: process.env.HERALD_API_KEY });
 * const { id } = await herald.notify({ userId: 'alice', payload: { title: 'Hello' } });
 * const { token } = await herald.createToken('alice'); // hand it to alice's browser
 * ```
 */
export function createHeraldServer(options: HeraldServerOptions): HeraldServer {
  checkOptions(options);
  const base = options.url.replace(/\/+$/, '');
  const retries = options.retries ?? 3;
  const maxRetryDelayMs = options.maxRetryDelayMs ?? 10_000;
  const timeoutMs = options.timeoutMs ?? 10_000;
  const doFetch = options.fetch ?? fetch;

  async function call<T>(
    method: 'GET' | 'POST',
    path: string,
    body?: unknown,
    idempotencyKey?: string,
  ): Promise<{ status: number; body: T; headers: Headers }> {
    // Once an attempt of a send may have been accepted (no answer, a 503 that says so, a 409 in flight),
    // the send may have happened whatever a later attempt is told: the error says so to the end.
    let maybeAccepted = false;
    for (let attempt = 0; ; attempt++) {
      let response: Response;
      let text: string;
      try {
        response = await doFetch(`${base}${path}`, {
          method,
          headers: {
            authorization: `Bearer ${options.apiKey}`,
            ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
            ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}),
          },
          ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
          signal: AbortSignal.timeout(timeoutMs),
        });
        // The timeout bounds the body too: an answer whose body stops half-way is no answer.
        text = await response.text();
      } catch (cause) {
        // No answer (or not all of it): the request may or may not have arrived. Safe to resend: GETs,
        // idempotent reads, and sends with their Idempotency-Key.
        if (idempotencyKey !== undefined) maybeAccepted = true;
        const delay = backoff(attempt);
        if (attempt < retries && delay <= maxRetryDelayMs) {
          await sleep(delay);
          continue;
        }
        throw new HeraldApiError('HERALD_ERR_NETWORK', `Herald's gateway did not answer ${method} ${path}.`, {
          status: 0,
          maybeAccepted,
          idempotencyKey,
          cause,
        });
      }
      const parsed = text.length > 0 ? safeJson(text) : undefined;
      if (response.ok) {
        // Every route the client calls answers a JSON object: anything else (a proxy's page, a
        // captive portal) is not Herald's answer, and a send behind it may or may not have happened.
        if (typeof parsed === 'object' && parsed !== null)
          return { status: response.status, body: parsed as T, headers: response.headers };
        throw new HeraldApiError(
          'HERALD_ERR_BAD_RESPONSE',
          `${method} ${path} answered ${response.status} with a body that is not Herald's JSON: is ${base} the gateway?${idempotencyKey ? ' Retry with the same idempotencyKey.' : ''}`,
          { status: response.status, maybeAccepted: idempotencyKey !== undefined, idempotencyKey },
        );
      }
      const error = (parsed ?? {}) as {
        error?: string;
        code?: string;
        details?: unknown;
        retryAfterMs?: number;
        maybeAccepted?: boolean;
      };
      if (
        idempotencyKey !== undefined &&
        (error.maybeAccepted === true || error.code === 'HERALD_ERR_IDEMPOTENCY_IN_FLIGHT')
      )
        maybeAccepted = true;
      const retryAfterMs = retryAfter(response.headers.get('retry-after'), error.retryAfterMs);
      const retryable = response.status === 503 || response.status === 429 || response.status === 409;
      const delay = retryAfterMs ?? backoff(attempt);
      if (retryable && attempt < retries && delay <= maxRetryDelayMs) {
        await sleep(delay);
        continue;
      }
      throw new HeraldApiError(
        error.code ?? `HERALD_ERR_HTTP_${response.status}`,
        error.error ?? `Herald answered ${response.status} to ${method} ${path}.`,
        {
          status: response.status,
          details: error.details,
          retryAfterMs,
          maybeAccepted: maybeAccepted || error.maybeAccepted === true,
          idempotencyKey,
        },
      );
    }
  }

  const user = (userId: string) => `/users/${encodeURIComponent(userId)}/notifications`;

  return {
    async notify({ idempotencyKey = crypto.randomUUID(), ...notification }) {
      const answer = await call<NotifyAccepted>('POST', '/notify', notification, idempotencyKey);
      return {
        ...answer.body,
        idempotencyKey,
        replayed: answer.headers.get('idempotency-replayed') === 'true',
      };
    },
    async notifyBatch(notifications, { idempotencyKey = crypto.randomUUID() } = {}) {
      const answer = await call<BatchAccepted>('POST', '/notify/batch', { notifications }, idempotencyKey);
      return {
        ...answer.body,
        idempotencyKey,
        replayed: answer.headers.get('idempotency-replayed') === 'true',
      };
    },
    async createToken(userId, options = {}) {
      return (await call<TokenResponse>('POST', '/tokens', { userId, ...options })).body;
    },
    async status(id) {
      try {
        return (await call<NotificationStatus>('GET', `/notifications/${encodeURIComponent(id)}`)).body;
      } catch (error) {
        // The gateway's own "no such notification": not a 404 of a route it does not have (a url with a
        // path it does not serve: "No route …") or of something else in between (a proxy's page).
        if (
          error instanceof HeraldApiError &&
          error.code === 'HERALD_ERR_NOT_FOUND' &&
          !error.message.startsWith('No route ')
        )
          return undefined;
        throw error;
      }
    },
    inbox: {
      async list(userId, { after, before, newest, limit } = {}) {
        const query = new URLSearchParams();
        if (after !== undefined) query.set('after', after);
        if (before !== undefined) query.set('before', before);
        if (newest !== undefined) query.set('newest', String(newest));
        if (limit !== undefined) query.set('limit', String(limit));
        const suffix = query.size > 0 ? `?${query}` : '';
        return (await call<InboxListPage>('GET', `${user(userId)}${suffix}`)).body;
      },
      async markRead(userId, selection) {
        return (
          await call<{ changed: number; unread: UnreadEvent }>('POST', `${user(userId)}/read`, selection)
        ).body;
      },
    },
  };
}

/** Options a request could never succeed with are told at once, before any request. */
function checkOptions(options: HeraldServerOptions): void {
  const refuse = (message: string) => {
    throw new HeraldApiError('HERALD_ERR_VALIDATION', `createHeraldServer: ${message}.`, { status: 0 });
  };
  let protocol = '';
  try {
    protocol = new URL(options.url).protocol;
  } catch {}
  if (protocol !== 'http:' && protocol !== 'https:')
    refuse(`url must be an http:// or https:// address of the gateway, not ${JSON.stringify(options.url)}`);
  if (typeof options.apiKey !== 'string' || options.apiKey.length === 0)
    refuse(
      `apiKey must be a non-empty string (got ${typeof options.apiKey === 'string' ? 'an empty one' : String(options.apiKey)})`,
    );
  for (const name of ['retries', 'maxRetryDelayMs', 'timeoutMs'] as const) {
    const value = options[name];
    const least = name === 'timeoutMs' ? 1 : 0;
    if (value !== undefined && !(Number.isSafeInteger(value) && value >= least))
      refuse(`${name} must be a whole number ≥ ${least}, not ${String(value)}`);
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** `Retry-After` in whole seconds (the gateway's), or the body's finer `retryAfterMs`. */
function retryAfter(header: string | null, bodyMs: number | undefined): number | undefined {
  if (typeof bodyMs === 'number' && Number.isFinite(bodyMs)) return Math.max(0, bodyMs);
  if (header === null) return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

/** 200 ms, 400 ms, 800 ms … with full jitter, when the gateway gave no `Retry-After`. */
function backoff(attempt: number): number {
  return Math.round(Math.random() * 200 * 2 ** attempt);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
