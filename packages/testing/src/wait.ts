/**
 * Polls `probe` until it returns a value other than `undefined`/`false`, or throws when `timeoutMs` passes.
 * Tests wait with this, never with fixed sleeps.
 */
export async function waitFor<T>(
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  options: { timeoutMs?: number; intervalMs?: number; what?: string } = {},
): Promise<T> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const intervalMs = options.intervalMs ?? 20;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) {
      throw new Error(`Timed out after ${timeoutMs} ms waiting for ${options.what ?? 'condition'}`, {
        cause: lastError,
      });
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** A random id for keys, queues and users, so that no test sees another's data. */
export function randomId(prefix = 't'): string {
  return `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
}

/**
 * POSTs `body` as JSON to `url` with `apiKey` and answers the response, sent again every 100 ms while it
 * is a 503 (a gateway whose Redis answered too late, e.g. a limiter decision past
 * `HERALD_RATE_LIMIT_TIMEOUT_MS` on a loaded machine: "nothing was accepted, retry"), as a backend
 * would, for up to `timeoutMs`; after that the 503 is answered.
 *
 * @example
 * ```ts
 * const response = await postRetrying503(`${gateway.url}/notify`, API_KEY, { userId: 'alice', payload: {} });
 * ```
 */
export async function postRetrying503(
  url: string,
  apiKey: string,
  body: unknown,
  timeoutMs = 10_000,
): Promise<Response> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const response = await fetch(url, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (response.status !== 503 || Date.now() > deadline) return response;
    await response.arrayBuffer();
    // Polled again until the deadline (the answer says retry).
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
