/**
 * What the operator CLI (`@herald/cli`) uses of the gateway: its configuration, the API key store and
 * the limits, the failed set and the delivery webhooks, through this entry (`@herald/gateway/operator`) rather than the gateway's files.
 */

export { checkWebhookUrl, WebhookEvents, WebhookStore } from '@herald/webhooks';
export { failedJobs, type RetryOutcome, retryFailed } from './admin/failed.js';
export {
  type ApiKeyIdentity,
  type ApiKeyRecord,
  ApiKeyStore,
  envKeyId,
  type KeyInboxBounds,
  type KeyLimits,
} from './api-keys.js';
export { type GatewayConfig, loadConfig, MAX_LIMIT, MIN_RATE } from './config.js';
export { Limits } from './limits.js';
