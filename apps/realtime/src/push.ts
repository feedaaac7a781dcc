import { connectionErrorLog, createRedis, QUEUE_OPTIONS, REDIS_ROLE_OPTIONS } from '@herald/config';
import type { AckResult, Inbox } from '@herald/inbox';
import {
  type ClientToServerEvents,
  ErrorCode,
  PushSocketEvent,
  type PushSubscribeReply,
  type ServerToClientEvents,
  type SocketData,
} from '@herald/protocol';
import {
  checkSubscription,
  type EscalationJob,
  EscalationRecords,
  escalationQueueName,
  PushSubscriptions,
} from '@herald/push';
import { Queue } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Socket } from 'socket.io';
import { commandArgs, withinCommandTime } from './command-args.js';
import type { RealtimeConfig } from './config.js';

type HeraldSocket = Socket<ClientToServerEvents, ServerToClientEvents, Record<string, never>, SocketData>;

/** Realtime's part of Web Push: the `push-*` events of a socket, and escalations cancelled by acks. */
export interface RealtimePush {
  /** Answers `push-key`, `push-subscribe` and `push-unsubscribe` on `socket`, for its own user only. */
  attach(socket: HeraldSocket): void;
  /**
   * First acks (from `Inbox.acknowledge`): their escalations still waiting are removed from the queue and
   * recorded `acked`, in the background. Only when push is on; the escalation job checks the ack again
   * when it fires, so one that could not be removed (running already) sends nothing either.
   */
  acked(inbox: Inbox, userId: string, acked: AckResult): void;
  close(): Promise<void>;
}

const NOT_CONFIGURED = {
  ok: false as const,
  code: ErrorCode.PUSH_NOT_CONFIGURED,
  error: 'Web Push is not configured on this deployment (HERALD_VAPID_PUBLIC_KEY).',
};
const UNAVAILABLE = {
  ok: false as const,
  code: ErrorCode.UNAVAILABLE,
  error: 'Redis unavailable: retry shortly.',
};

/** Builds realtime's Web Push handling on `redis` (the inbox's connection) and, for cancels, its own BullMQ connection. */
export function realtimePush(config: RealtimeConfig, redis: Redis | Cluster, log: Logger): RealtimePush {
  const { push } = config;
  const store = new PushSubscriptions(redis, config.inbox.prefix);
  const records = new EscalationRecords(redis);
  const cluster =
    push.enabled && config.redisClusterNodes
      ? createRedis({ url: config.redisUrl, clusterNodes: config.redisClusterNodes }, 'worker')
      : undefined;
  const queue = push.enabled
    ? new Queue<EscalationJob>(escalationQueueName(config.queue.name), {
        ...QUEUE_OPTIONS,
        prefix: config.queue.prefix,
        connection: cluster ?? { url: config.redisUrl, ...REDIS_ROLE_OPTIONS.worker },
      })
    : undefined;
  queue?.on('error', connectionErrorLog(log, 'escalation queue error'));

  async function cancel(inbox: Inbox, userId: string, acked: AckResult): Promise<void> {
    const markers = await Promise.all(acked.ids.map((id) => inbox.markerKey(userId, id)));
    for (const index of await records.pending(markers)) {
      const id = acked.ids[index] ?? '';
      const job = await queue?.getJob(id);
      // Job ids are one namespace: only this user's own escalation is touched.
      if (!job || job.data.tenantId !== inbox.tenantId || job.data.userId !== userId) continue;
      const removed = await job.remove().then(
        () => true,
        () => false, // running already: it finds the ack and sends nothing
      );
      if (removed) {
        await records.settle(markers[index] ?? '', {
          state: 'acked',
          at: new Date(acked.deliveredAtMs).toISOString(),
        });
      }
    }
  }

  return {
    attach(socket) {
      const { tenantId, userId } = socket.data;
      socket.on(PushSocketEvent.KEY, (...args) => {
        const [, reply] = commandArgs(args);
        if (typeof reply !== 'function') return;
        const answer = reply as unknown as (value: unknown) => void;
        answer(push.publicKey ? { ok: true, publicKey: push.publicKey } : NOT_CONFIGURED);
      });
      socket.on(PushSocketEvent.SUBSCRIBE, (...args) => {
        const [body, reply] = commandArgs(args);
        const answer = (reply ?? (() => {})) as unknown as (value: PushSubscribeReply) => void;
        if (!push.enabled) return answer(NOT_CONFIGURED);
        const checked = checkSubscription((body as { subscription?: unknown } | undefined)?.subscription, {
          allowPrivate: push.allowPrivate,
        });
        if ('code' in checked) return answer({ ok: false, ...checked });
        withinCommandTime(store.add(tenantId, userId, checked)).then(
          ({ count, replaced }) =>
            answer({ ok: true, subscriptions: count, ...(replaced ? { replaced } : {}) }),
          (error: unknown) => {
            log.warn({ err: error }, 'push-subscribe failed');
            answer(UNAVAILABLE);
          },
        );
      });
      socket.on(PushSocketEvent.UNSUBSCRIBE, (...args) => {
        const [body, reply] = commandArgs(args);
        const answer = (reply ?? (() => {})) as unknown as (value: PushSubscribeReply) => void;
        const endpoint = (body as { endpoint?: unknown } | undefined)?.endpoint;
        if (typeof endpoint !== 'string' || endpoint.length === 0) {
          return answer({
            ok: false,
            code: ErrorCode.PUSH_SUBSCRIPTION_INVALID,
            error: 'Expected { endpoint: string }: the endpoint of the subscription to remove',
          });
        }
        withinCommandTime(store.remove(tenantId, userId, endpoint)).then(
          (count) => answer({ ok: true, subscriptions: count }),
          (error: unknown) => {
            log.warn({ err: error }, 'push-unsubscribe failed');
            answer(UNAVAILABLE);
          },
        );
      });
    },
    acked(inbox, userId, acked) {
      if (queue === undefined || acked.ids.length === 0) return;
      cancel(inbox, userId, acked).catch((error: unknown) =>
        log.warn({ err: error, userId }, 'escalation not cancelled (it checks the ack when due)'),
      );
    },
    async close() {
      await queue?.close();
      cluster?.disconnect();
    },
  };
}
