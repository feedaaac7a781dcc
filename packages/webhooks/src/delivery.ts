import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { WebhookJob } from '@herald/protocol';
import { signature } from './signing.js';
import type { WebhookStore } from './store.js';
import { checkWebhookUrl, guardedLookup } from './url.js';

/** How the worker delivers webhooks (`HERALD_WEBHOOK_*`). */
export interface DeliverySettings {
  /** Attempts per message before it is failed for good. */
  attempts: number;
  /** First retry after this many ms, doubling each time (±20% jitter), at most an hour. */
  backoffMs: number;
  /** How long one POST may take, connection to last byte of the answer, ms. */
  timeoutMs: number;
  /** Failed attempts in a row (any messages) after which an endpoint is parked. */
  parkAfter: number;
  /** Loopback and private addresses allowed (`HERALD_WEBHOOK_ALLOW_PRIVATE`, `HERALD_DEV_MODE`). */
  allowPrivate: boolean;
}

/** What one run of a webhook job came to; the worker maps it onto BullMQ (retry: delayed; failed: failed set). */
export type DeliveryOutcome =
  | { outcome: 'delivered'; status: number }
  | { outcome: 'held' | 'no-webhook' | 'not-subscribed' }
  | { outcome: 'retry'; delayMs: number; error: string }
  | { outcome: 'failed'; error: string };

/** Largest answer body read from an endpoint (the rest is discarded): Herald ignores it anyway. */
const MAX_ANSWER_BYTES = 64 * 1024;

/** The wait before retry `attempt` (1 = the first retry): `backoffMs · 2^(attempt-1)`, ±20%, at most 1 h. */
export function retryDelayMs(backoffMs: number, attempt: number, random = Math.random): number {
  const base = Math.min(backoffMs * 2 ** Math.min(attempt - 1, 30), 3_600_000);
  return Math.round(base * (0.8 + 0.4 * random()));
}

/**
 * One attempt of one webhook message: the endpoint's current settings are read (a changed URL, a new
 * secret or a deletion apply to messages already queued), a parked endpoint's message is held, and
 * otherwise the body is POSTed, signed for this attempt's timestamp. A 2xx is delivered; anything else
 * (status, timeout, refused address, connection error) counts against the endpoint and retries, until
 * `attempts` have failed or the endpoint is parked (the message is then held).
 */
export async function deliverWebhook(
  job: WebhookJob,
  store: WebhookStore,
  settings: DeliverySettings,
  now: () => number = Date.now,
): Promise<DeliveryOutcome> {
  const record = await store.record(job.tenantId);
  // No webhook, or not the one it was produced for (deleted since, another set in its place): dropped.
  if (record === undefined || (job.webhook !== undefined && job.webhook !== record.createdAt))
    return { outcome: 'no-webhook' };
  if (!record.events.includes(job.payload.type)) return { outcome: 'not-subscribed' };
  if (record.state === 'parked') {
    const held = await store.hold(job);
    if (held !== 'deliver') return { outcome: held === 'held' ? 'held' : 'no-webhook' };
  }
  const attempt = (job.attempts ?? 0) + 1;
  let error: string;
  try {
    const problem = checkWebhookUrl(record.url, { allowPrivate: settings.allowPrivate });
    if (problem) throw new Error(`URL ${problem.message}`);
    const body = JSON.stringify(job.payload);
    // Redis's clock in Herald's worker (`now`): receivers refuse one more than 5 minutes from theirs,
    // and a worker 6 minutes behind had every message refused.
    const timestamp = Math.floor(now() / 1000);
    const status = await post(record.url, body, settings, {
      'webhook-id': job.id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signature(record.secrets, job.id, timestamp, body),
    });
    if (status >= 200 && status < 300) {
      await store.succeeded(job.tenantId);
      return { outcome: 'delivered', status };
    }
    error = `HTTP ${status}`;
  } catch (cause) {
    error = (cause as Error).message;
  }
  const parked = await store.failed(job.tenantId, `attempt ${attempt}: ${error}`, settings.parkAfter);
  if (parked) {
    // Parked by this failure (or another at the same time): the message waits for `resume`.
    const held = await store.hold({ ...job, attempts: attempt });
    if (held === 'held') return { outcome: 'held' };
  }
  if (attempt >= settings.attempts) return { outcome: 'failed', error: `${attempt} attempts: ${error}` };
  return { outcome: 'retry', delayMs: retryDelayMs(settings.backoffMs, attempt), error };
}

/** POSTs `body` as JSON; answers the status once the whole answer arrived (or rejects), within `timeoutMs`. */
function post(
  target: string,
  body: string,
  settings: DeliverySettings,
  headers: Record<string, string>,
): Promise<number> {
  const url = new URL(target);
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const request = send(
      url,
      {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(body)),
          'user-agent': 'Herald-Webhooks/1',
          ...headers,
        },
        // Every address the name resolves to is checked where the socket connects (no DNS rebinding).
        ...(settings.allowPrivate ? {} : { lookup: guardedLookup }),
        signal: AbortSignal.timeout(settings.timeoutMs),
      },
      (response) => {
        let read = 0;
        response.on('data', (chunk: Buffer) => {
          read += chunk.length;
          if (read > MAX_ANSWER_BYTES) response.destroy();
        });
        response.on('end', () => resolve(response.statusCode ?? 0));
        response.on('close', () => resolve(response.statusCode ?? 0));
        response.on('error', reject);
      },
    );
    request.on('error', (error) =>
      reject(error.name === 'AbortError' ? new Error(`no answer within ${settings.timeoutMs} ms`) : error),
    );
    request.end(body);
  });
}
