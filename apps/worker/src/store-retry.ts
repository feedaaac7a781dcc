/** Longest a failing store is retried in the worker (its user's later notifications waiting), ms. */
export const STORE_RETRY_MAX_MS = 30_000;
/** First pause between two tries of a failing store, ms; doubled after each, up to 1 s (an eighth of the lock). */
const STORE_RETRY_PAUSE_MS = 50;
const STORE_RETRY_PAUSE_MAX_MS = 1000;

/**
 * Replies of a Redis that cannot take the write now but will (a failover, a restart, a script running,
 * memory full until the inboxes trim or expire), by their first word. A refusal of the data itself
 * (WRONGTYPE, ERR, NOPERM) is not one: trying again gives the same answer.
 */
const TRANSIENT_REPLY = /^(CLUSTERDOWN|TRYAGAIN|LOADING|READONLY|MASTERDOWN|BUSY|OOM|NOREPLICAS|MOVED|ASK)\b/;
/** ioredis's own messages when a connection, a Cluster's slot table or a command's time ran out. */
const TRANSIENT_MESSAGE =
  /Connection is closed|Too many Cluster redirections|Failed to refresh slots cache|None of startup nodes is available|Cluster isn't ready|Command timed out|Stream isn't writeable|max retries per request/i;
/**
 * Socket errors (`code`). Not a replica wait that missed (`HERALD_REPLICA_WAIT`, see store.ts): the
 * append was done, in its place, and the attempt's retry only waits again and pushes.
 */
const TRANSIENT_CODE = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
]);

/**
 * Whether a store failed because Redis could not take it now (a connection, a timeout, a failover, a
 * Cluster without a master for the slot), not because of what was stored: trying the same store again
 * later may succeed. Looks through `cause`s.
 */
export function isTransientStoreError(error: unknown): boolean {
  for (let cause = error, depth = 0; cause instanceof Error && depth < 5; depth++) {
    const code = (cause as { code?: unknown }).code;
    if (typeof code === 'string' && TRANSIENT_CODE.has(code)) return true;
    if (TRANSIENT_REPLY.test(cause.message) || TRANSIENT_MESSAGE.test(cause.message)) return true;
    cause = cause.cause;
  }
  return false;
}

/** What bounds {@link retryStore}'s tries of one store. */
export interface StoreRetryLimits {
  /** Aborted when the worker shuts down: the store then fails at once, and its job goes back to BullMQ. */
  signal: AbortSignal;
  /** Renews the lock of the store's job for `lockMs`; resolves whether it still holds it. */
  extendLock?: () => Promise<boolean>;
  /** The BullMQ lock of a job (`HERALD_WORKER_LOCK_MS`), ms. */
  lockMs: number;
  /** Called once, at the first transient failure (then the retries begin). */
  onHold?: (error: unknown) => void;
}

/**
 * Runs `store`, and runs it again while it fails with a {@link isTransientStoreError transient error}:
 * pauses of 50 ms doubling to 1 s, for at most {@link STORE_RETRY_MAX_MS}, and only while the job's lock
 * is safe, so that no other worker takes the job while this one still tries it. The lock is renewed here
 * every eighth of `lockMs`; at the first failure it is taken to have been renewed half a `lockMs` before
 * (BullMQ renews it once less than half is left), and the tries are given up once it has not been
 * renewed for three quarters of `lockMs`, a quarter before it could expire. Then, on shutdown, or on
 * another error, it fails with the last error, as a store that was never retried here would. `store`
 * must be idempotent (the append is, through its marker: a try that Redis carried out though its answer was
 * lost is answered `already-appended`).
 *
 * Run inside the user's lane of {@link UserOrder}: the user's later notifications wait meanwhile, so that
 * a store that fails for a moment is not overtaken by them (BullMQ's retry would store it after them).
 */
export async function retryStore<T>(store: () => Promise<T>, limits: StoreRetryLimits): Promise<T> {
  const started = Date.now();
  let lockedAt = started;
  let pause = STORE_RETRY_PAUSE_MS;
  const maxPause = Math.min(STORE_RETRY_PAUSE_MAX_MS, limits.lockMs / 8);
  let renewing: NodeJS.Timeout | undefined;
  // The lock is renewed on BullMQ's own connection, which may be failing too: never waited for.
  const renew = () =>
    void limits.extendLock?.().then(
      (held) => {
        if (held) lockedAt = Date.now();
      },
      () => {},
    );
  try {
    for (;;) {
      try {
        return await store();
      } catch (error) {
        if (!isTransientStoreError(error) || limits.signal.aborted) throw error;
        if (renewing === undefined) {
          limits.onHold?.(error);
          lockedAt = Date.now() - limits.lockMs / 2;
          renew();
          renewing = setInterval(renew, limits.lockMs / 8);
        }
        const next = Date.now() + pause;
        if (next - started > STORE_RETRY_MAX_MS || next - lockedAt > (limits.lockMs * 3) / 4) throw error;
        await pauseFor(pause, limits.signal);
        if (limits.signal.aborted) throw error;
        pause = Math.min(pause * 2, maxPause);
      }
    }
  } finally {
    clearInterval(renewing);
  }
}

/** Resolves after `ms`, or at once when `signal` aborts. */
function pauseFor(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
