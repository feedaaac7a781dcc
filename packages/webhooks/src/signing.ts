import { createHmac, randomBytes } from 'node:crypto';

/** The prefix of a Herald (Standard Webhooks) signing secret. */
export const SECRET_PREFIX = 'whsec_';

/**
 * A new signing secret: `whsec_` + base64 of 32 random bytes, the format every Standard Webhooks
 * library (`standardwebhooks`, `svix`) takes as it is.
 *
 * @example
 * ```ts
 * const secret = generateSecret(); // 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw…'
 * ```
 */
export function generateSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString('base64')}`;
}

/**
 * The `webhook-signature` header of one attempt: `v1,<base64 HMAC-SHA256 of "id.timestamp.body">` per
 * secret (the HMAC key is the secret's base64-decoded bytes), space-separated, as Standard Webhooks
 * define it; two while a rotated secret's previous one still signs.
 *
 * @example
 * ```ts
 * signature([secret], 'msg_1', 1767225600, '{"type":"notification.read"}'); // 'v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4='
 * ```
 */
export function signature(
  secrets: readonly string[],
  id: string,
  timestampSeconds: number,
  body: string,
): string {
  const content = `${id}.${timestampSeconds}.${body}`;
  return secrets
    .map((secret) => {
      const key = Buffer.from(
        secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret,
        'base64',
      );
      return `v1,${createHmac('sha256', key).update(content).digest('base64')}`;
    })
    .join(' ');
}
