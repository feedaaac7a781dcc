import Type from 'typebox';
import {
  DEFAULT_INBOX_MAX_AGE_MS,
  DEFAULT_INBOX_MAX_LENGTH,
  DEFAULT_INBOX_PREFIX,
  DEFAULT_INBOX_RECORD_GRACE_MS,
  type InboxOptions,
} from './types.js';

/**
 * The environment variables of the inbox, as TypeBox properties to spread into an app's env schema, so
 * that the worker, the realtime servers and the gateway read them the same way (they must agree).
 *
 * @example
 * ```ts
 * const EnvSchema = Type.Object({ PORT: Type.Integer(), ...InboxEnv });
 * const inbox = new Inbox(redis, inboxSettings(parsed));
 * ```
 */
export const InboxEnv = {
  HERALD_INBOX_PREFIX: Type.String({ minLength: 1, pattern: '^[^{}]+$', default: DEFAULT_INBOX_PREFIX }),
  HERALD_INBOX_MAX_LENGTH: Type.Integer({
    minimum: 1,
    maximum: 1_000_000,
    default: DEFAULT_INBOX_MAX_LENGTH,
  }),
  // At most 10 years, and the records' grace at most one: kept longer is kept for ever.
  HERALD_INBOX_MAX_AGE_MS: Type.Integer({
    minimum: 1000,
    maximum: 315_360_000_000,
    default: DEFAULT_INBOX_MAX_AGE_MS,
  }),
  // At least a minute: a job's re-run after its first append (stalled lock, retries) must find its marker.
  HERALD_INBOX_RECORD_GRACE_MS: Type.Integer({
    minimum: 60_000,
    maximum: 31_536_000_000,
    default: DEFAULT_INBOX_RECORD_GRACE_MS,
  }),
};

/** The values {@link InboxEnv} parses to. */
export interface InboxEnvValues {
  HERALD_INBOX_PREFIX: string;
  HERALD_INBOX_MAX_LENGTH: number;
  HERALD_INBOX_MAX_AGE_MS: number;
  HERALD_INBOX_RECORD_GRACE_MS: number;
}

/**
 * The {@link Inbox} options from parsed {@link InboxEnv} values.
 *
 * @example
 * ```ts
 * inboxSettings({ HERALD_INBOX_PREFIX: 'herald:inbox:', HERALD_INBOX_MAX_LENGTH: 1000, HERALD_INBOX_MAX_AGE_MS: 86_400_000, HERALD_INBOX_RECORD_GRACE_MS: 86_400_000 });
 * ```
 */
export function inboxSettings(parsed: InboxEnvValues): Required<Omit<InboxOptions, 'tenantId'>> {
  return Object.freeze({
    prefix: parsed.HERALD_INBOX_PREFIX,
    maxLength: parsed.HERALD_INBOX_MAX_LENGTH,
    maxAgeMs: parsed.HERALD_INBOX_MAX_AGE_MS,
    recordGraceMs: parsed.HERALD_INBOX_RECORD_GRACE_MS,
  });
}
