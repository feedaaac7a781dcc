export { InboxError, InboxErrorCode } from './errors.js';
export { Inbox } from './inbox.js';
export {
  assertPrefix,
  escapeTag,
  type InboxKeys,
  inboxKeys,
  notificationIdFor,
  notificationIndexKey,
  routedMarkerKey,
  routedSlot,
  slotTag,
  tenantLayout,
  tenantPrefix,
  unroutedId,
} from './keys.js';
export { type KeptUser, type MigrationReport, migrateToTenant, migrationJournalKey } from './migrate.js';
export {
  compareOffsets,
  isOffset,
  offsetSeq,
  type ParsedOffset,
  parseOffset,
  ZERO_OFFSET,
} from './offsets.js';
export { type MuteChange, Preferences } from './preferences.js';
export { readReplies } from './reads.js';
export { AppendCode } from './scripts.js';
export { InboxEnv, type InboxEnvValues, inboxSettings } from './settings.js';
export { type AudiencePage, checkLabel, checkTopic, type FanoutRecord, Topics } from './topics.js';
export * from './types.js';
