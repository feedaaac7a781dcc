export {
  type DeliveryOutcome,
  type DeliverySettings,
  deliverWebhook,
  retryDelayMs,
} from './delivery.js';
export { messageId, SUBSCRIPTION_CACHE_MS, WebhookEvents } from './producer.js';
export {
  WebhookDeliveryEnv,
  type WebhookEnvValues,
  WebhookUrlEnv,
  type WebhookWorkerSettings,
  webhookSettings,
} from './settings.js';
export { generateSecret, SECRET_PREFIX, signature } from './signing.js';
export {
  type HoldOutcome,
  MAX_HELD,
  PREVIOUS_SECRET_MS,
  type ResumeResult,
  type WebhookRecord,
  WebhookStore,
} from './store.js';
export {
  checkWebhookUrl,
  guardedLookup,
  guardedLookupFor,
  isNonPublicAddress,
  PrivateAddressError,
  type UrlProblem,
} from './url.js';
