/**
 * Where a job stands in its producer's send order: `createdAt` (ms), then the producer's `seq`; with its
 * BullMQ `priority` (1 the highest; absent: the lowest), which comes before both.
 */
export type SendOrder = readonly [createdAtMs: number, seq: number, priority?: number];

interface Pending {
  order: SendOrder;
  start: () => void;
  fail: (error: unknown) => void;
}

/**
 * A task that never ran: the task of its key before it failed with an error that holds the lane (see
 * {@link UserOrder}), and this one, later in send order, must not be stored before that one is.
 */
export class LaneHeldError extends Error {
  readonly code = 'HERALD_LANE_HELD';
  constructor(cause: unknown) {
    super(
      'Not run: an earlier notification of the same recipient failed to be stored; this one is retried after it, so as not to overtake it.',
      { cause },
    );
    this.name = 'LaneHeldError';
  }
}

interface Lane {
  running: boolean;
  pending: Pending[];
}

const priorityOf = (order: SendOrder) => order[2] ?? Number.MAX_SAFE_INTEGER;
const before = (a: SendOrder, b: SendOrder) => priorityOf(a) - priorityOf(b) || a[0] - b[0] || a[1] - b[1];

/**
 * Runs the tasks of one key (a recipient) one at a time, in send order, while tasks of different keys run
 * side by side. The worker runs up to `HERALD_WORKER_CONCURRENCY` jobs at once, and BullMQ hands them to
 * the processor in an order of its own (jobs fetched by a finishing job and by a new fetch race through
 * different promise chains): a batch of 50 to one user was stored out of send order in 3 of 5 runs. A
 * task waits one event-loop turn (`setImmediate`), so that the jobs one turn brought in are all there,
 * then a user's tasks run one after another, highest priority first (BullMQ's took it first from a
 * backlog: the user's sends taken with it must not hold it back), then earliest send first (`createdAt`,
 * then `seq`), each picked when the one before has settled. Sends of one gateway process keep their order; sends in the same
 * millisecond through two gateways have none to keep.
 *
 * A task that fails with an error `holds` says holds its lane (a store that failed for a moment and was
 * given up, to be retried by BullMQ): the tasks of its key waiting then fail too, with
 * {@link LaneHeldError}, rather than run now and be stored before it.
 *
 * @example
 * ```ts
 * const order = new UserOrder();
 * await Promise.all([
 *   order.run('acme/alice', [t, 2], () => store(second)),
 *   order.run('acme/alice', [t, 1], () => store(first)),   // runs first
 * ]);
 * ```
 */
export class UserOrder {
  readonly #lanes = new Map<string, Lane>();
  readonly #holds: (error: unknown) => boolean;

  constructor(options: { holds?: (error: unknown) => boolean } = {}) {
    this.#holds = options.holds ?? (() => false);
  }

  /** Runs `task` once every task of `key` given before it in send order (and still waiting) has settled. */
  run<T>(key: string, order: SendOrder, task: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let lane = this.#lanes.get(key);
      if (lane === undefined) {
        lane = { running: false, pending: [] };
        this.#lanes.set(key, lane);
      }
      const own = lane;
      own.pending.push({
        order,
        fail: reject,
        start: () => {
          task()
            .then(resolve, (error: unknown) => {
              if (this.#holds(error)) {
                for (const waiting of own.pending.splice(0)) waiting.fail(new LaneHeldError(error));
              }
              reject(error);
            })
            .finally(() => {
              own.running = false;
              this.#next(key, own);
            });
        },
      });
      if (!own.running && own.pending.length === 1) setImmediate(() => this.#next(key, own));
    });
  }

  /** Keys with a task running or waiting. */
  get size(): number {
    return this.#lanes.size;
  }

  #next(key: string, lane: Lane): void {
    if (lane.running) return;
    if (lane.pending.length === 0) {
      if (this.#lanes.get(key) === lane) this.#lanes.delete(key);
      return;
    }
    let first = 0;
    for (let i = 1; i < lane.pending.length; i++) {
      if (before((lane.pending[i] as Pending).order, (lane.pending[first] as Pending).order) < 0) first = i;
    }
    const [next] = lane.pending.splice(first, 1);
    lane.running = true;
    next?.start();
  }
}
