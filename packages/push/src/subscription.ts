import { ErrorCode, PUSH_ENDPOINT_MAX_LENGTH, type PushSubscriptionJSON } from '@herald/protocol';
import { checkWebhookUrl } from '@herald/webhooks';
import { publicKeyProblem } from './settings.js';

/** Why a `push-subscribe` body is refused: its code (a `push-subscribe` reply) and what to fix. */
export interface SubscriptionProblem {
  code: typeof ErrorCode.PUSH_SUBSCRIPTION_INVALID | typeof ErrorCode.PUSH_ENDPOINT_REFUSED;
  error: string;
}

/**
 * Checks what a browser sent as its push subscription, before it is stored: the JSON of a
 * `PushSubscription` (`endpoint`, `keys.p256dh` a P-256 point, `keys.auth` 16 bytes, both base64url), and
 * an endpoint that is an `https:` URL (RFC 8030; web-push speaks nothing else) of at most 2048 characters
 * on a public address unless `allowPrivate`: anyone with a user token chooses this URL, and the worker
 * will POST to it (SSRF). Host names are resolved and checked again at every send (`guardedLookup`).
 * Answers the subscription as it will be stored (only these fields), or the problem.
 *
 * @example
 * ```ts
 * const checked = checkSubscription(body.subscription, { allowPrivate: false });
 * if ('code' in checked) reply({ ok: false, ...checked });
 * ```
 */
export function checkSubscription(
  raw: unknown,
  options: { allowPrivate: boolean },
): PushSubscriptionJSON | SubscriptionProblem {
  const invalid = (what: string): SubscriptionProblem => ({
    code: ErrorCode.PUSH_SUBSCRIPTION_INVALID,
    error: `Invalid push subscription: ${what}; send PushSubscription.toJSON()`,
  });
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return invalid('not an object');
  const { endpoint, keys, expirationTime } = raw as Record<string, unknown>;
  if (typeof endpoint !== 'string' || endpoint.length === 0) return invalid('endpoint is not a string');
  if (endpoint.length > PUSH_ENDPOINT_MAX_LENGTH) {
    return invalid(`endpoint is longer than ${PUSH_ENDPOINT_MAX_LENGTH} characters`);
  }
  if (typeof keys !== 'object' || keys === null) return invalid('keys is not an object');
  const { p256dh, auth } = keys as Record<string, unknown>;
  if (typeof p256dh !== 'string' || publicKeyProblem(p256dh, 'keys.p256dh') !== undefined) {
    return invalid('keys.p256dh is not a P-256 public key (65 bytes, base64url)');
  }
  if (typeof auth !== 'string' || !/^[A-Za-z0-9_-]{22}(==)?$/.test(auth)) {
    return invalid('keys.auth is not 16 bytes of base64url');
  }
  if (expirationTime !== undefined && expirationTime !== null && !Number.isFinite(expirationTime)) {
    return invalid('expirationTime is neither null nor a number');
  }
  let protocol = '';
  try {
    protocol = new URL(endpoint).protocol;
  } catch {}
  const problem =
    protocol === 'https:'
      ? checkWebhookUrl(endpoint, {
          allowPrivate: options.allowPrivate,
          setting: 'HERALD_PUSH_ALLOW_PRIVATE',
        })
      : { kind: 'invalid', message: 'must be an https:// URL' };
  if (problem) {
    return {
      code: ErrorCode.PUSH_ENDPOINT_REFUSED,
      error: `Push endpoint refused: it ${problem.message}`,
    };
  }
  return {
    endpoint,
    expirationTime: typeof expirationTime === 'number' ? expirationTime : null,
    keys: { p256dh, auth },
  };
}
