import { createHmac } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import Type from 'typebox';
import { RedisClock } from './redis-clock.js';
import { settleWithin } from './settle-within.js';

/**
 * `HERALD_DEPLOYMENT`: the name under which an app's instances meet to compare the settings they must
 * agree on (default `herald`). Two deployments on one Redis use two names.
 */
export const DeploymentEnv = {
  HERALD_DEPLOYMENT: Type.String({ pattern: '^[A-Za-z0-9_.-]{1,64}$', default: 'herald' }),
};

/** The Herald apps that register in a deployment. */
export type HeraldApp = 'gateway' | 'worker' | 'realtime';

/**
 * What an app records about itself: the settings that must agree across apps, by variable name
 * (`HERALD_QUEUE_NAME`, …). Secrets are recorded as {@link secretFingerprint}, never as themselves.
 */
export type DeploymentSettings = Readonly<Record<string, string>>;

/**
 * A keyed hash of a secret (HMAC-SHA-256 keyed by the secret itself, 16 base64url characters): two
 * instances can tell that their secrets differ without either revealing it.
 *
 * @example
 * ```ts
 * secretFingerprint(config.jwtSecret); // 'q3v0…'
 * ```
 */
export function secretFingerprint(secret: string): string {
  return createHmac('sha256', secret)
    .update('herald deployment fingerprint v1')
    .digest('base64url')
    .slice(0, 16);
}

/** The parsed values of the settings every app records ({@link deploymentSettings}). */
export interface DeploymentEnvValues {
  HERALD_QUEUE_NAME: string;
  HERALD_QUEUE_PREFIX: string;
  HERALD_QUEUE_PARTITIONS: number;
  HERALD_INBOX_PREFIX: string;
  HERALD_PUBSUB_KEY: string;
  HERALD_PUBSUB_MODE: string;
  HERALD_KEY_PREFIX: string;
}

/**
 * The {@link DeploymentSettings} every app records: the queue, the inbox prefix, the live channel and the
 * gateway's key prefix, and with `jwtSecret` (the apps that sign or check user tokens) its
 * {@link secretFingerprint}.
 *
 * @example
 * ```ts
 * deploymentSettings(parsed, secrets.jwtSecret); // { HERALD_QUEUE_NAME: 'notifications', …, HERALD_JWT_SECRET: 'q3v0…' }
 * ```
 */
export function deploymentSettings(parsed: DeploymentEnvValues, jwtSecret?: string): DeploymentSettings {
  return Object.freeze({
    HERALD_QUEUE_NAME: parsed.HERALD_QUEUE_NAME,
    HERALD_QUEUE_PREFIX: parsed.HERALD_QUEUE_PREFIX,
    HERALD_QUEUE_PARTITIONS: String(parsed.HERALD_QUEUE_PARTITIONS),
    HERALD_INBOX_PREFIX: parsed.HERALD_INBOX_PREFIX,
    HERALD_PUBSUB_KEY: parsed.HERALD_PUBSUB_KEY,
    HERALD_PUBSUB_MODE: parsed.HERALD_PUBSUB_MODE,
    HERALD_KEY_PREFIX: parsed.HERALD_KEY_PREFIX,
    ...(jwtSecret === undefined ? {} : { HERALD_JWT_SECRET: secretFingerprint(jwtSecret) }),
  });
}

interface Registration {
  app: HeraldApp;
  settings: DeploymentSettings;
  /** ms since epoch of the last heartbeat. */
  at: number;
  /**
   * ms since epoch of its first heartbeat (Redis's clock): who joined first. Absent in registrations of
   * versions before it, which count as the first.
   */
  since?: number;
}

/** Longest {@link DeploymentFingerprint.stop} waits for Redis to forget this instance, ms. */
export const LEAVE_MS = 1000;

/**
 * Every instance of a deployment writes its {@link DeploymentSettings} to the Redis hash
 * `herald:deployment:{<name>}` (field: its instance id) every `heartbeatMs`, and `/readyz` compares its
 * own with the live others' (heard from within 3 heartbeats): a setting both record with different
 * values is a mismatch, which the `/readyz` of the one that joined later names (503) instead of the
 * silent loss a mismatch causes (a queue nobody consumes, tokens the realtime servers refuse, pushes on
 * a channel nobody hears).
 *
 * @example
 * ```ts
 * const fingerprint = new DeploymentFingerprint(redis, { deployment: 'herald', app: 'worker', instanceId, settings });
 * fingerprint.start();
 * const problems = await fingerprint.mismatches(); // [] when everyone agrees
 * ```
 */
export class DeploymentFingerprint {
  readonly key: string;
  readonly #redis: Redis | Cluster;
  readonly #app: HeraldApp;
  readonly #instanceId: string;
  readonly #settings: DeploymentSettings;
  readonly #heartbeatMs: number;
  /**
   * Heartbeats are stamped and judged on Redis's clock (read at every beat): on the machines' own, an
   * instance whose clock was 15 s or more behind looked gone to the others, and its settings, however
   * wrong, were never compared.
   */
  readonly #clock: RedisClock;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  /** When this instance joined (its first heartbeat, Redis's clock); undefined until then. */
  #since: number | undefined;

  constructor(
    redis: Redis | Cluster,
    options: {
      deployment: string;
      app: HeraldApp;
      instanceId: string;
      settings: DeploymentSettings;
      heartbeatMs?: number;
    },
  ) {
    this.key = `herald:deployment:{${options.deployment}}`;
    this.#redis = redis;
    this.#app = options.app;
    this.#instanceId = options.instanceId;
    this.#settings = Object.freeze({ ...options.settings });
    this.#heartbeatMs = options.heartbeatMs ?? 5000;
    this.#clock = new RedisClock(redis);
  }

  /** Registers now and then every heartbeat (failures are retried at the next beat). */
  start(): void {
    const beat = () => {
      void this.#clock.sync().then(() => {
        // A beat still reading the clock when the instance stopped would register it again.
        if (this.#stopped) return;
        const at = this.#clock.now();
        this.#since ??= at;
        const registration: Registration = {
          app: this.#app,
          settings: this.#settings,
          at,
          since: this.#since,
        };
        return this.#redis
          .multi()
          .hset(this.key, this.#instanceId, JSON.stringify(registration))
          .pexpire(this.key, this.#heartbeatMs * 3)
          .exec()
          .catch(() => {});
      });
    };
    beat();
    this.#timer = setInterval(beat, this.#heartbeatMs);
    this.#timer.unref();
  }

  /**
   * Leaves the deployment (on shutdown), waiting at most {@link LEAVE_MS} for Redis: while Redis is away
   * or frozen a connection that queues commands (the worker's) would hold the shutdown for its whole
   * grace (a worker told SIGTERM on a frozen Redis waited for its jobs, then a heartbeat here, and ran out
   * of its 10 s), and the registration is ignored three heartbeats after its last beat anyway.
   */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    await settleWithin(
      this.#redis.hdel(this.key, this.#instanceId).catch(() => {}),
      Math.min(LEAVE_MS, this.#heartbeatMs),
      undefined,
    );
  }

  /**
   * The settings where this instance and a live other one that joined the deployment before it disagree,
   * one sentence each, e.g. `HERALD_QUEUE_NAME: this gateway (gw-1) has "notifications", worker w-2 has
   * "jobs"`. Only the newer of two instances that disagree says so (its `/readyz` 503): one misconfigured
   * instance started into a running deployment (a rolling update, a typo in one pod's environment) is
   * kept out of its load balancer, and the instances already serving stay ready, where every instance
   * had gone unready (an outage, for one pod's typo). Rejects when Redis does not answer.
   */
  async mismatches(): Promise<string[]> {
    const fields = await this.#redis.hgetall(this.key);
    const now = this.#clock.now();
    const problems: string[] = [];
    for (const [instance, raw] of Object.entries(fields)) {
      if (instance === this.#instanceId) continue;
      let other: Registration;
      try {
        other = JSON.parse(raw) as Registration;
      } catch {
        continue;
      }
      if (typeof other?.at !== 'number' || now - other.at > this.#heartbeatMs * 3) continue;
      if (!this.#joinedAfter(instance, other.since)) continue;
      for (const [name, mine] of Object.entries(this.#settings)) {
        const theirs = other.settings?.[name];
        if (theirs === undefined || theirs === mine) continue;
        problems.push(
          `${name}: this ${this.#app} (${this.#instanceId}) has "${mine}", ${other.app} ${instance} has "${theirs}"`,
        );
      }
    }
    return problems.sort();
  }

  /** Whether this instance joined after `instance` (joined at `since`; ties by instance id). */
  #joinedAfter(instance: string, since: unknown): boolean {
    const theirs = typeof since === 'number' ? since : 0;
    const mine = this.#since ?? Number.POSITIVE_INFINITY;
    return mine > theirs || (mine === theirs && this.#instanceId > instance);
  }
}
