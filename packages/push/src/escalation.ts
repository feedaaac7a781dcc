import { readReplies } from '@herald/inbox';
import type { EscalationStatus, PushMessage } from '@herald/protocol';
import type { Cluster, Redis } from 'ioredis';

/** BullMQ job name of an escalation (one job per notification, on its own queue). */
export const ESCALATE_JOB_NAME = 'escalate';

/**
 * The escalation queue of notification queue `queueName`: `<queue>-escalate`, so that delayed escalations
 * never sit in front of notifications, and the workers take them with their own concurrency.
 *
 * @example
 * ```ts
 * escalationQueueName('herald-notifications'); // 'herald-notifications-escalate'
 * ```
 */
export function escalationQueueName(queueName: string): string {
  return `${queueName}-escalate`;
}

/** Data of an escalation job: whose notification, what to push, and what earlier attempts did already. */
export interface EscalationJob {
  /** The notification id; also the job id, so a retried notification job schedules it once. */
  id: string;
  tenantId: string;
  userId: string;
  /** The push message, built when the notification was stored (its offset known). */
  message: PushMessage;
  /** Endpoints done by earlier attempts (sent, gone or rejected): a retry sends only to the others. */
  done?: string[];
  sent?: number;
  failed?: number;
}

/**
 * The escalation record of one notification, in its inbox marker hash (field `escalation`, JSON), where
 * `GET /notifications/:id` reads it; the marker's TTL (the inbox retention) covers it.
 */
export class EscalationRecords {
  readonly #redis: Redis | Cluster;

  constructor(redis: Redis | Cluster) {
    this.#redis = redis;
  }

  /** Records `scheduled` unless a record exists (a notification job that runs again must not undo `pushed`). */
  async scheduled(marker: string, dueAtMs: number): Promise<void> {
    const record: EscalationStatus = { state: 'scheduled', dueAt: new Date(dueAtMs).toISOString() };
    await this.#redis.hsetnx(marker, 'escalation', JSON.stringify(record));
  }

  /** Writes the outcome (`acked`, `pushed`, `skipped`) on an existing marker; a marker gone stays gone. */
  async settle(marker: string, record: EscalationStatus): Promise<void> {
    const [exists, raw] = await readReplies(this.#redis, (redis) => [
      redis.exists(marker),
      redis.hget(marker, 'escalation'),
    ]);
    if (exists !== 1) return;
    const dueAt = parse(raw)?.dueAt;
    await this.#redis.hset(marker, 'escalation', JSON.stringify({ ...record, ...(dueAt ? { dueAt } : {}) }));
  }

  /**
   * What the escalation job finds when its deadline comes: the marker's state (`inbox`, `cancelled`, …,
   * or null when gone), the first ack's time (ms) if any, and the escalation record.
   */
  async facts(marker: string): Promise<{
    state: string | null;
    deliveredAtMs: number | undefined;
    escalation: EscalationStatus | undefined;
  }> {
    const [state, deliveredAt, escalation] = await this.#redis.hmget(
      marker,
      'state',
      'deliveredAt',
      'escalation',
    );
    return {
      state: state ?? null,
      deliveredAtMs: deliveredAt ? Number(deliveredAt) : undefined,
      escalation: parse(escalation),
    };
  }

  /** Of `markers`, the indices whose escalation is still `scheduled` (what an ack may cancel). */
  async pending(markers: readonly string[]): Promise<number[]> {
    if (markers.length === 0) return [];
    const results = await readReplies(this.#redis, (redis) =>
      markers.map((marker) => redis.hget(marker, 'escalation')),
    );
    return results.flatMap((raw, index) => (parse(raw)?.state === 'scheduled' ? [index] : []));
  }
}

function parse(raw: string | null | undefined): EscalationStatus | undefined {
  if (!raw) return undefined;
  try {
    return JSON.parse(raw) as EscalationStatus;
  } catch {
    return undefined;
  }
}
