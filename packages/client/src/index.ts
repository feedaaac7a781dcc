export { type BackoffOptions, backoffDelay } from './backoff.js';
export { createHeraldClient } from './client.js';
export { HeraldError, HeraldUnauthorizedError } from './errors.js';
export { compareOffsets, isOffset, parseOffset } from './offsets.js';
export {
  heraldPushMessage,
  type PushRegistration,
  type PushRegistrationLike,
  type PushSubscriptionLike,
} from './push.js';
export { type AddOutcome, type HeraldItem, type InboxSnapshot, InboxStore } from './store.js';
export type { ChannelLike, LockManagerLike } from './tabs.js';
export { refreshDelay, type TokenClaims, tokenClaims } from './token.js';
export type {
  ConnectionState,
  HeraldClient,
  HeraldClientOptions,
  HeraldEvents,
  HeraldPreferences,
  HeraldState,
  MuteTarget,
  PageLike,
  PageTarget,
  ResumeInfo,
  TopicSubscription,
} from './types.js';
