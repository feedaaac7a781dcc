import { Agent, request } from 'node:https';
import type { PushMessage, PushSubscriptionJSON } from '@herald/protocol';
import { checkWebhookUrl, guardedLookupFor } from '@herald/webhooks';
import webpush from 'web-push';
import type { VapidKeys } from './settings.js';

/**
 * Largest push message body Herald sends, in bytes of JSON: a push service must accept 4096 bytes of
 * encrypted record (RFC 8030 §7.2), of which aes128gcm's header, padding delimiter and tag take 103;
 * 3,000 leaves room for the JSON's own escaping. A larger notification is sent without its payload.
 */
export const PUSH_MESSAGE_MAX_BYTES = 3000;

/** How long a push service keeps a message for a browser that is offline: a day, in seconds (`TTL`). */
export const PUSH_TTL_SECONDS = 24 * 3600;

/**
 * What one push did: `sent` (2xx), `gone` (404/410: the subscription expired or was unsubscribed;
 * remove it), `rejected` (any other 4xx, or a private address: this message will never go through;
 * not retried), `retry` (429, 5xx, timeout, network: the push service may take it later).
 */
export type PushOutcome =
  | { kind: 'sent'; status: number }
  | { kind: 'gone'; status: number }
  | { kind: 'rejected'; status?: number; reason: string }
  | { kind: 'retry'; status?: number; reason: string };

/**
 * The push message of a stored notification: the `notification` event's fields, or, when that would not
 * fit ({@link PUSH_MESSAGE_MAX_BYTES}), the same without `payload` and with `truncated: true`.
 *
 * @example
 * ```ts
 * const body = JSON.stringify(pushMessage({ id, offset, userId, createdAt, payload }));
 * ```
 */
export function pushMessage(notification: Omit<PushMessage, 'kind' | 'truncated'>): PushMessage {
  const full: PushMessage = { kind: 'herald.notification', ...notification };
  if (Buffer.byteLength(JSON.stringify(full)) <= PUSH_MESSAGE_MAX_BYTES) return full;
  const { payload: _payload, ...rest } = full;
  return { ...rest, truncated: true };
}

/** An https agent whose connections refuse non-public addresses (checked on the address connected to). */
const guardedAgent = new Agent({ lookup: guardedLookupFor('HERALD_PUSH_ALLOW_PRIVATE'), keepAlive: true });
const plainAgent = new Agent({ keepAlive: true });

/**
 * Most of a push service's answer read (for the reason of a refusal): a 2xx counts at its status line,
 * and no answer is read past this. The endpoint is a URL a user chose; web-push's own
 * `sendNotification` kept the whole answer in one string (an endless one grew the worker to its heap
 * limit) and timed out only a silent socket (one byte every few seconds held the escalation for ever).
 */
const ANSWER_MAX_BYTES = 4096;

/**
 * Sends `message` to one subscription as a Web Push message: encrypted for the browser's keys (RFC 8291,
 * `aes128gcm`) and signed with the VAPID key (RFC 8292) by the `web-push` library (the reference
 * implementation the browsers' push services are tested against, rather than hand-written ECDH/HKDF
 * and JWT code), which makes the request; Herald sends it, within `timeoutMs` from connection to
 * answer, reading at most {@link ANSWER_MAX_BYTES} of the answer. Never throws: answers what happened.
 *
 * @example
 * ```ts
 * const outcome = await sendPush(subscription, message, vapid, { allowPrivate: false, timeoutMs: 10_000 });
 * if (outcome.kind === 'gone') await store.remove(tenantId, userId, subscription.endpoint);
 * ```
 */
export async function sendPush(
  subscription: PushSubscriptionJSON,
  message: PushMessage,
  vapid: VapidKeys,
  options: { allowPrivate: boolean; timeoutMs: number },
): Promise<PushOutcome> {
  if (!options.allowPrivate) {
    // The guarded lookup checks names; an IP literal is never looked up, so it is checked here (one stored
    // before the subscribe-time check refused its form would otherwise be sent to).
    const problem = checkWebhookUrl(subscription.endpoint, {
      allowPrivate: false,
      setting: 'HERALD_PUSH_ALLOW_PRIVATE',
    });
    if (problem) return { kind: 'rejected', reason: `Push endpoint refused: it ${problem.message}` };
  }
  try {
    const details = webpush.generateRequestDetails(
      { endpoint: subscription.endpoint, keys: subscription.keys },
      JSON.stringify(message),
      { vapidDetails: vapid, TTL: PUSH_TTL_SECONDS, urgency: 'high', contentEncoding: 'aes128gcm' },
    );
    const answer = await post(details, options);
    if (answer.status >= 200 && answer.status < 300) return { kind: 'sent', status: answer.status };
    return outcomeOfStatus(answer.status, `Push service answered ${answer.status}: ${answer.text}`);
  } catch (error) {
    return outcomeOf(error);
  }
}

/** POSTs web-push's request; answers the status (and, for a non-2xx, the start of the body) within `timeoutMs`. */
function post(
  details: webpush.RequestDetails,
  options: { allowPrivate: boolean; timeoutMs: number },
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const call = request(
      details.endpoint,
      {
        method: details.method,
        headers: details.headers as Record<string, string | number>,
        agent: options.allowPrivate ? plainAgent : guardedAgent,
        signal: AbortSignal.timeout(options.timeoutMs),
      },
      (response) => {
        const status = response.statusCode ?? 0;
        const accepted = status >= 200 && status < 300;
        let text = '';
        const done = () => resolve({ status, text: text.slice(0, ANSWER_MAX_BYTES) });
        // Accepted: nothing in the body matters, so the answer is at its status line. The body is still
        // drained (a short one frees the connection for the next push), but never past the limit.
        if (accepted) done();
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => {
          text += chunk;
          if (text.length >= ANSWER_MAX_BYTES) {
            response.destroy();
            done();
          }
        });
        response.on('end', done);
        // Cut by the timeout with the answer begun: its status stands, with what came of its body.
        response.on('error', done);
        response.on('close', done);
      },
    );
    call.on('error', (error) =>
      reject(
        error.name === 'AbortError' ? new Error(`no complete answer within ${options.timeoutMs} ms`) : error,
      ),
    );
    call.end(details.body ?? undefined);
  });
}

function outcomeOf(error: unknown): PushOutcome {
  const reason = error instanceof Error ? error.message : String(error);
  // The guarded lookup refused a private address: it will refuse it every time.
  if (error instanceof Error && error.name === 'PrivateAddressError') return { kind: 'rejected', reason };
  return { kind: 'retry', reason: reason.slice(0, 200) };
}

function outcomeOfStatus(status: number, text: string): PushOutcome {
  const reason = text.slice(0, 200);
  if (status === 404 || status === 410) return { kind: 'gone', status };
  if (status === 429 || status >= 500) return { kind: 'retry', status, reason };
  return { kind: 'rejected', status, reason };
}
