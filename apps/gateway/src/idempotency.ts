import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Cluster, Redis } from 'ioredis';
import stringify from 'safe-stable-stringify';

/** Longest `Idempotency-Key` accepted. */
export const IDEMPOTENCY_KEY_MAX_LENGTH = 255;

const BEGIN_LUA = readFileSync(new URL('./idempotency-begin-1.lua', import.meta.url), 'utf8');
const RELEASE_LUA = readFileSync(new URL('./idempotency-release-1.lua', import.meta.url), 'utf8');
/** Wait between two tries of a release or an answer that failed, ms. */
const RETRY_MS = 200;
/** Most failed releases and answers retried at once (each holds a timer until it lands or its claim expires). */
const MAX_PENDING = 10_000;

const BEGIN_COMMAND = 'heraldIdempotencyBegin';
const RELEASE_COMMAND = 'heraldIdempotencyRelease';
/** How much longer than the key's lifetime its epoch is kept (it must outlive the record, see begin-1.lua). */
const EPOCH_MARGIN_MS = 10 * 60_000;

/** A stored first answer. */
export interface StoredAnswer {
  statusCode: number;
  body: unknown;
}

/** What `begin` found. */
export type IdempotencyBegin =
  /** Claimed; `epoch`: the key's, from which the notification id is derived (see {@link IdempotencyStore.derivedId}). */
  | { state: 'new'; epoch: string }
  | { state: 'in-flight' }
  | { state: 'mismatch' }
  | { state: 'replay'; answer: StoredAnswer };

interface Entry {
  /** SHA-256 of the canonical request body. */
  h: string;
  /** The claiming request's owner token, so that only it releases the claim. */
  o?: string;
  /** The first answer, once there is one. */
  a?: StoredAnswer;
}

/**
 * Idempotency records, scoped to an API key: `<prefix>idem:{<apiKeyId>}:<sha256(key)>`.
 * `begin` claims the key atomically (SET NX GET), so of N concurrent requests exactly one proceeds;
 * `complete` keeps its answer for the TTL (24 h by default) independent of BullMQ's job retention.
 */
export class IdempotencyStore {
  readonly #redis: Redis | Cluster;
  readonly #prefix: string;
  readonly #ttlMs: number;
  readonly #inFlightMs: number;
  readonly #begin: (record: string, epoch: string, ...args: string[]) => Promise<[string | null, string?]>;
  readonly #release: (key: string, owner: string) => Promise<number>;
  /** Releases and answers that failed and are being sent again (see `#sendLater`). */
  #pending = 0;

  /**
   * `inFlightMs`: how long a claim holds its key before another request with it may take over (a
   * gateway killed mid-request never releases its claims). Taking over never delivers twice: the notification
   * id is derived from the key.
   */
  constructor(options: {
    redis: Redis | Cluster;
    keyPrefix: string;
    ttlSeconds: number;
    inFlightMs: number;
  }) {
    this.#redis = options.redis;
    this.#prefix = options.keyPrefix;
    this.#ttlMs = options.ttlSeconds * 1000;
    this.#inFlightMs = options.inFlightMs;
    this.#begin = defineOnce(this.#redis, BEGIN_COMMAND, 2, BEGIN_LUA);
    this.#release = defineOnce(this.#redis, RELEASE_COMMAND, 1, RELEASE_LUA);
  }

  /** A digest of `body` that ignores key order and whitespace. */
  static fingerprint(body: unknown): string {
    return createHash('sha256')
      .update(stringify(body) ?? '')
      .digest('hex');
  }

  /**
   * The notification id of a request with an `Idempotency-Key`: derived from the API key (scope), the
   * key, the request (its fingerprint) and the key's epoch ({@link begin}). A retry of it gets the same
   * id even when the record is gone (released after a refusal or a failure, taken over from a gateway
   * that died, deleted by hand), and an inbox, which stores an id once, never delivers it twice.
   * Another request under the same key (its record gone), or the key used again after its lifetime,
   * gets a new id: before, it got the first one's, and was dropped after its 202.
   */
  static derivedId(scope: string, key: string, fingerprint: string, epoch: string): string {
    const hex = createHash('sha256').update(`${scope}\n${key}\n${fingerprint}\n${epoch}`).digest('hex');
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
  }

  #key(scope: string, key: string): string {
    return `${this.#prefix}idem:{${scope}}:${createHash('sha256').update(key).digest('hex')}`;
  }

  /** The key's epoch (see idempotency-begin-1.lua), beside its record: same hash tag, same slot. */
  #epochKey(scope: string, key: string): string {
    return `${this.#prefix}idem:{${scope}}:e:${createHash('sha256').update(key).digest('hex')}`;
  }

  /** Claims the key for the request that holds `owner` (a random token), or says who has it. */
  async begin(scope: string, key: string, fingerprint: string, owner: string): Promise<IdempotencyBegin> {
    const claim: Entry = { h: fingerprint, o: owner };
    const [previous, epoch] = await this.#begin(
      this.#key(scope, key),
      this.#epochKey(scope, key),
      JSON.stringify(claim),
      String(this.#inFlightMs),
      String(this.#ttlMs),
      String(this.#ttlMs + EPOCH_MARGIN_MS),
    );
    if (previous === null) return { state: 'new', epoch: epoch ?? '' };
    const entry = JSON.parse(previous) as Entry;
    if (entry.h !== fingerprint) return { state: 'mismatch' };
    return entry.a ? { state: 'replay', answer: entry.a } : { state: 'in-flight' };
  }

  /**
   * Stores `answer` as the key's first answer. One that fails (Redis away) is sent again as a failed
   * release is (see {@link #sendLater}): the request was accepted, and until its answer is stored a
   * retry of it gets 409 "in flight".
   */
  async complete(scope: string, key: string, fingerprint: string, answer: StoredAnswer): Promise<void> {
    const entry: Entry = { h: fingerprint, a: answer };
    const store = () => this.#redis.set(this.#key(scope, key), JSON.stringify(entry), 'PX', this.#ttlMs);
    try {
      await store();
    } catch (error) {
      this.#sendLater(store);
      throw error;
    }
  }

  /**
   * Releases `owner`'s claim, whose request was not accepted (refused or failed), so the client may
   * retry at once. Safe to send when it is unknown whether the claim was made (a `begin` that timed
   * out): it deletes nothing but that owner's unsettled claim.
   */
  async abandon(scope: string, key: string, owner: string): Promise<void> {
    const release = () => this.#release(this.#key(scope, key), owner);
    try {
      await release();
    } catch (error) {
      this.#sendLater(release);
      throw error;
    }
  }

  /**
   * Sends a release or an answer that failed (Redis away: down, frozen, failing over) again every
   * {@link RETRY_MS} until it lands or the claim has expired by itself: the key is free (or answers)
   * for the client's retry as soon as Redis answers, not only after `inFlightMs` (a Redis Cluster
   * failover left keys "in flight" for their whole 5 s, and the retries of the requests cut off by it
   * got 409s until then). At most {@link MAX_PENDING} wait at once; beyond that a claim just expires.
   */
  #sendLater(send: () => Promise<unknown>): void {
    if (this.#pending >= MAX_PENDING) return;
    this.#pending++;
    const until = Date.now() + this.#inFlightMs;
    const attempt = () => {
      send().then(
        () => this.#pending--,
        () => {
          if (Date.now() + RETRY_MS >= until) this.#pending--;
          else setTimeout(attempt, RETRY_MS).unref();
        },
      );
    };
    setTimeout(attempt, RETRY_MS).unref();
  }
}

/** ioredis `defineCommand` (EVALSHA, EVAL on NOSCRIPT), once per client: the command, bound to it. */
function defineOnce<T extends (...args: string[]) => Promise<unknown>>(
  redis: Redis | Cluster,
  name: string,
  numberOfKeys: number,
  lua: string,
): T {
  if (!(name in redis)) redis.defineCommand(name, { numberOfKeys, lua });
  const command = (redis as unknown as Record<string, T>)[name];
  if (typeof command !== 'function') throw new Error(`ioredis did not define ${name}`);
  return command.bind(redis) as T;
}
