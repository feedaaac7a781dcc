export {
  ESCALATE_JOB_NAME,
  type EscalationJob,
  EscalationRecords,
  escalationQueueName,
} from './escalation.js';
export {
  PUSH_MESSAGE_MAX_BYTES,
  PUSH_TTL_SECONDS,
  type PushOutcome,
  pushMessage,
  sendPush,
} from './send.js';
export {
  DEV_VAPID_KEYS,
  PushEnv,
  PushKeyEnv,
  PushSenderEnv,
  type PushSettings,
  publicKeyProblem,
  resolvePush,
  serverEnvExtras,
  type VapidKeys,
} from './settings.js';
export {
  PUSH_SUBSCRIPTION_TTL_MS,
  type PushSubscriptionKeys,
  PushSubscriptions,
  pushSubscriptionKeys,
} from './store.js';
export { checkSubscription, type SubscriptionProblem } from './subscription.js';
