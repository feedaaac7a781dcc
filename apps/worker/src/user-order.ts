/** Where a job stands in its producer's send order: `createdAt` (ms), then the producer's `seq`. */
export type SendOrder = readonly [createdAtMs: number, seq: number];

interface Pending {
  order: SendOrder;
  start: () => void;
}

interface Lane {
  running: boolean;
  pending: Pending[];
}

const before = (a: SendOrder, b: SendOrder) => a[0] - b[0] || a[1] - b[1];

/**
 * Runs the tasks of one key (a recipient) one at a time, in send order, while tasks of different keys run
 * side by side. The worker runs up to `HERALD_WORKER_CONCURRENCY` jobs at once, and BullMQ hands them to
 * the processor in an order of its own (jobs fetched by a finishing job and by a new fetch race through
 * different promise chains): a batch of 50 to one user was stored out of send order in 3 of 5 runs. A
 * task waits one event-loop turn (`setImmediate`), so that the jobs one turn brought in are all there,
 * then a user's tasks run one after another, earliest send first (`createdAt`, then `seq`), each picked
 * when the one before has settled. Sends of one gateway process keep their order; sends in the same
 * millisecond through two gateways have none to keep.
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
        start: () => {
          task()
            .then(resolve, reject)
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
