/**
 * Names shared by every Herald process. Changing one is a breaking change of the wire contract.
 */

/** Default BullMQ queue that carries notifications from the gateway to the workers. */
export const DEFAULT_QUEUE_NAME = 'notifications';

/**
 * Default BullMQ key prefix. The braces are a Redis Cluster hash tag: BullMQ needs every key of one
 * queue in one slot.
 */
export const DEFAULT_QUEUE_PREFIX = '{herald}';

/** Default prefix of the live channels (`@herald/live`) that the worker and gateway publish on and realtime subscribes to. */
export const DEFAULT_PUBSUB_KEY = 'herald';

/** BullMQ job name of a single notification. */
export const NOTIFY_JOB_NAME = 'notify';

/**
 * BullMQ job name of an envelope: the immediate notifications one gateway accepted in one short window
 * (`HERALD_ENVELOPE_WINDOW_MS`), carried by one job ({@link NotificationEnvelope}).
 */
export const NOTIFY_ENVELOPE_JOB_NAME = 'envelope';

/** Socket.IO event that carries a notification to a browser. */
export const NOTIFICATION_EVENT = 'notification';
