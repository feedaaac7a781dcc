export { InboxError, InboxErrorCode } from './errors.js';
export {
  type AppendResult,
  DEFAULT_INBOX_MAX_AGE_MS,
  DEFAULT_INBOX_MAX_LENGTH,
  DEFAULT_INBOX_PREFIX,
  Inbox,
  type InboxItem,
  type InboxListing,
  type InboxNotification,
  type InboxOptions,
  type InboxPage,
  MAX_PAGE,
  type NotificationStatus,
  type ReadResult,
  type ReadSelection,
} from './inbox.js';
export {
  assertPrefix,
  escapeTag,
  type InboxKeys,
  inboxKeys,
  notificationIndexKey,
  tenantPrefix,
} from './keys.js';
export { type MigrationReport, migrateToTenant } from './migrate.js';
export {
  compareOffsets,
  isOffset,
  offsetSeq,
  type ParsedOffset,
  parseOffset,
  ZERO_OFFSET,
} from './offsets.js';
export { AppendCode } from './scripts.js';
export { InboxEnv, type InboxEnvValues, inboxSettings } from './settings.js';
