import { Agent } from 'node:https';
import type { PushMessage, PushSubscriptionJSON } from '@herald/protocol';
import { checkWebhookUrl, guardedLookup } from '@herald/webhooks';
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
const guardedAgent = new Agent({ lookup: guardedLookup, keepAlive: true });
const plainAgent = new Agent({ keepAlive: true });

/**
 * Sends `message` to one subscription as a Web Push message: encrypted for the browser's keys (RFC 8291,
 * `aes128gcm`) and signed with the VAPID key (RFC 8292), by the `web-push` library (the reference
 * implementation the browsers' push services are tested against, rather than hand-written ECDH/HKDF
 * and JWT code). Never throws: answers what happened.
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
    const answer = await webpush.sendNotification(
      { endpoint: subscription.endpoint, keys: subscription.keys },
      JSON.stringify(message),
      {
        vapidDetails: vapid,
        TTL: PUSH_TTL_SECONDS,
        urgency: 'high',
        contentEncoding: 'aes128gcm',
        timeout: options.timeoutMs,
        agent: options.allowPrivate ? plainAgent : guardedAgent,
      },
    );
    return { kind: 'sent', status: answer.statusCode };
  } catch (error) {
    return outcomeOf(error);
  }
}

function outcomeOf(error: unknown): PushOutcome {
  const status = (error as { statusCode?: unknown }).statusCode;
  const reason = error instanceof Error ? error.message.slice(0, 200) : String(error);
  if (typeof status !== 'number') {
    // The guarded lookup refused a private address: it will refuse it every time.
    if (error instanceof Error && error.name === 'PrivateAddressError') return { kind: 'rejected', reason };
    return { kind: 'retry', reason };
  }
  if (status === 404 || status === 410) return { kind: 'gone', status };
  if (status === 429 || status >= 500) return { kind: 'retry', status, reason };
  return { kind: 'rejected', status, reason };
}
