/** Optional delivery settings of a notification, validated by the gateway and honoured by the worker. */
export interface NotificationOptions {
  /** BullMQ priority: 1 (highest) to 2 097 152; absent = no priority (FIFO, fastest). */
  priority?: number;
  /** Deliver no earlier than this many ms after acceptance (scheduled delivery). */
  delayMs?: number;
  /** Drop the notification if it has not been delivered within this many ms of acceptance. */
  ttlMs?: number;
  /** Notifications to one recipient with the same `dedupeKey` collapse into the first. */
  dedupeKey?: string;
  /** Free-form labels the client may filter on. */
  topic?: string;
  type?: string;
}

/** Data of a BullMQ `notify` job. */
export interface NotificationJob extends NotificationOptions {
  /** Notification id, assigned by the gateway; also the BullMQ job id. */
  id: string;
  userId: string;
  payload: Record<string, unknown>;
  /** ISO 8601 time the gateway accepted the notification. */
  createdAt: string;
  /** Tenant (API key owner) that sent it, when known. */
  tenantId?: string;
}

/** What a browser receives as the `notification` Socket.IO event. */
export interface NotificationEvent {
  id: string;
  userId: string;
  payload: Record<string, unknown>;
  createdAt: string;
  topic?: string;
  type?: string;
}

/** Socket.IO events the server sends. */
export interface ServerToClientEvents {
  notification: (event: NotificationEvent) => void;
}

/** Socket.IO events a client sends (none yet). */
export type ClientToServerEvents = Record<never, never>;

/** Per-socket data the realtime server keeps after the handshake. */
export interface SocketData {
  userId: string;
}

/** The handshake `auth` object a client passes to `io(url, { auth })`. */
export interface HandshakeAuth {
  token: string;
}
