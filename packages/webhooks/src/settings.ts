import Type from 'typebox';
import type { DeliverySettings } from './delivery.js';

/**
 * `HERALD_WEBHOOK_ALLOW_PRIVATE`: the gateway (which checks URLs when they are set) and the worker (which
 * checks every address it connects to) read it the same way.
 */
export const WebhookUrlEnv = {
  HERALD_WEBHOOK_ALLOW_PRIVATE: Type.Boolean({ default: false }),
};

/** The worker's webhook delivery settings, as TypeBox properties to spread into its env schema. */
export const WebhookDeliveryEnv = {
  ...WebhookUrlEnv,
  HERALD_WEBHOOK_ATTEMPTS: Type.Integer({ minimum: 1, maximum: 100, default: 10 }),
  HERALD_WEBHOOK_BACKOFF_MS: Type.Integer({ minimum: 10, maximum: 3_600_000, default: 2000 }),
  HERALD_WEBHOOK_TIMEOUT_MS: Type.Integer({ minimum: 100, maximum: 60_000, default: 5000 }),
  HERALD_WEBHOOK_PARK_AFTER: Type.Integer({ minimum: 1, maximum: 100_000, default: 20 }),
  HERALD_WEBHOOK_CONCURRENCY: Type.Integer({ minimum: 1, maximum: 1000, default: 20 }),
  HERALD_WEBHOOK_ENDPOINT_CONCURRENCY: Type.Integer({ minimum: 1, maximum: 1000, default: 4 }),
};

/** The values {@link WebhookDeliveryEnv} parses to. */
export interface WebhookEnvValues {
  HERALD_WEBHOOK_ALLOW_PRIVATE: boolean;
  HERALD_WEBHOOK_ATTEMPTS: number;
  HERALD_WEBHOOK_BACKOFF_MS: number;
  HERALD_WEBHOOK_TIMEOUT_MS: number;
  HERALD_WEBHOOK_PARK_AFTER: number;
  HERALD_WEBHOOK_CONCURRENCY: number;
  HERALD_WEBHOOK_ENDPOINT_CONCURRENCY: number;
}

/** The worker's webhook settings: concurrency (all endpoints, and per endpoint per worker) and delivery. */
export interface WebhookWorkerSettings extends DeliverySettings {
  concurrency: number;
  endpointConcurrency: number;
}

/**
 * The webhook worker's settings from parsed {@link WebhookDeliveryEnv} values; private addresses are
 * allowed by the setting or by development mode.
 *
 * @example
 * ```ts
 * webhookSettings(parsed, parsed.HERALD_DEV_MODE);
 * ```
 */
export function webhookSettings(parsed: WebhookEnvValues, devMode: boolean): WebhookWorkerSettings {
  return Object.freeze({
    attempts: parsed.HERALD_WEBHOOK_ATTEMPTS,
    backoffMs: parsed.HERALD_WEBHOOK_BACKOFF_MS,
    timeoutMs: parsed.HERALD_WEBHOOK_TIMEOUT_MS,
    parkAfter: parsed.HERALD_WEBHOOK_PARK_AFTER,
    allowPrivate: parsed.HERALD_WEBHOOK_ALLOW_PRIVATE || devMode,
    concurrency: parsed.HERALD_WEBHOOK_CONCURRENCY,
    endpointConcurrency: parsed.HERALD_WEBHOOK_ENDPOINT_CONCURRENCY,
  });
}
