export { type BackoffOptions, backoffDelay } from './backoff.js';
export { createHeraldClient } from './client.js';
export { HeraldError, HeraldUnauthorizedError } from './errors.js';
export { compareOffsets, isOffset, parseOffset } from './offsets.js';
export type { PushRegistration, PushRegistrationLike, PushSubscriptionLike } from './push.js';
export { heraldPushMessage } from './push-message.js';
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
