/**
 * The chaos suite's ledger and checker (Jepsen's method): every 202 the load generator got is recorded,
 * every notification a client was shown is recorded, and at the end the two must match.
 */

/** What the load generator saw. */
export interface LoadCounts {
  /** Requests that ended in a 202 (each recorded in the ledger). */
  accepted: number;
  /** 503 answers (retried with the same `Idempotency-Key`). */
  unavailable: number;
  /** 409 answers: the same key still in flight (retried). */
  inFlight: number;
  /** Connection errors and timeouts (retried, on another gateway). */
  connectionErrors: number;
  /**
   * 408 answers: the request did not reach the gateway in time (a starved sender; retried with the same
   * key, as its message asks: an earlier attempt may have been accepted).
   */
  requestTimeouts: number;
  /** Other answers (not retried: a bug in the harness or the gateway). */
  other: number;
  /** The longest time from a request's first attempt to its 202, in ms. */
  maxAcceptMs: number;
}

/** One accepted notification: its id, its recipient and when the 202 arrived. */
export interface Accepted {
  id: string;
  userId: string;
  /** When the request was first sent. */
  sentAt: number;
  /** When its 202 arrived. */
  at: number;
}

/** One notification a client was shown. */
export interface Shown {
  id: string;
  offset: string;
  at: number;
}

/** One scenario's figures: the report table's row. */
export interface ChaosResult {
  scenario: string;
  accepted: number;
  shown: number;
  missing: number;
  duplicates: number;
  outOfOrder: number;
  /** Shown but never accepted (a request whose 202 was lost, enqueued twice under another id). */
  unexpected: number;
  unavailable: number;
  /** 503s answered more than a second after the fault's end (Redis was back by then). */
  unavailableAfter: number;
  inFlight: number;
  /**
   * 409s answered more than a second after the fault's end: a key still "in flight" with Redis back,
   * its claim left behind by a request that had already answered (or a killed gateway's, until
   * HERALD_IDEMPOTENCY_IN_FLIGHT_MS frees it).
   */
  inFlightAfter: number;
  connectionErrors: number;
  maxAcceptMs: number;
  /** From the fault's end until the last notification accepted before it was shown (0: none was late). */
  recoveryMs: number;
  /** From the fault's end until the last 202 of a request first sent before it (0: none was late). */
  acceptRecoveryMs: number;
  /** Ids of the first few missing notifications, for the failure message. */
  missingIds: string[];
}

/** Compares offsets `ms-seq` of one inbox stream. */
export function compareOffsets(a: string, b: string): number {
  const [am = 0, as = 0] = a.split('-').map(Number);
  const [bm = 0, bs = 0] = b.split('-').map(Number);
  return am === bm ? as - bs : am - bm;
}

/** Checks the ledger against what each user's client was shown. */
export function check(options: {
  scenario: string;
  accepted: readonly Accepted[];
  shown: ReadonlyMap<string, readonly Shown[]>;
  load: LoadCounts;
  /** When each 503 arrived. */
  unavailableAt: readonly number[];
  /** When each 409 arrived. */
  inFlightAt: readonly number[];
  faultEndAt: number;
}): ChaosResult {
  const acceptedIds = new Set(options.accepted.map((entry) => entry.id));
  const firstShown = new Map<string, number>();
  let shown = 0;
  let duplicates = 0;
  let outOfOrder = 0;
  let unexpected = 0;
  for (const events of options.shown.values()) {
    const seen = new Set<string>();
    let last: string | undefined;
    for (const event of events) {
      shown++;
      if (seen.has(event.id)) duplicates++;
      seen.add(event.id);
      if (!firstShown.has(event.id)) firstShown.set(event.id, event.at);
      if (!acceptedIds.has(event.id)) unexpected++;
      if (last !== undefined && compareOffsets(event.offset, last) <= 0) outOfOrder++;
      last = event.offset;
    }
  }
  const missingIds = options.accepted.filter((entry) => !firstShown.has(entry.id)).map((entry) => entry.id);
  let recoveryMs = 0;
  for (const entry of options.accepted) {
    const at = firstShown.get(entry.id);
    if (entry.at <= options.faultEndAt && at !== undefined && at > options.faultEndAt)
      recoveryMs = Math.max(recoveryMs, at - options.faultEndAt);
  }
  let acceptRecoveryMs = 0;
  for (const entry of options.accepted)
    if (entry.sentAt <= options.faultEndAt)
      acceptRecoveryMs = Math.max(acceptRecoveryMs, entry.at - options.faultEndAt);
  return {
    scenario: options.scenario,
    accepted: options.accepted.length,
    shown,
    missing: missingIds.length,
    duplicates,
    outOfOrder,
    unexpected,
    unavailable: options.load.unavailable,
    unavailableAfter: options.unavailableAt.filter((at) => at > options.faultEndAt + 1000).length,
    inFlight: options.load.inFlight,
    inFlightAfter: options.inFlightAt.filter((at) => at > options.faultEndAt + 1000).length,
    connectionErrors: options.load.connectionErrors,
    maxAcceptMs: options.load.maxAcceptMs,
    recoveryMs,
    acceptRecoveryMs,
    missingIds: missingIds.slice(0, 5),
  };
}

const COLUMNS: [keyof ChaosResult, string][] = [
  ['scenario', 'scenario'],
  ['accepted', 'accepted'],
  ['shown', 'shown'],
  ['missing', 'missing'],
  ['duplicates', 'dup'],
  ['outOfOrder', 'out of order'],
  ['unexpected', 'not accepted'],
  ['unavailable', '503s'],
  ['unavailableAfter', '503s > 1 s after'],
  ['inFlight', '409s'],
  ['inFlightAfter', '409s > 1 s after'],
  ['connectionErrors', 'conn errors'],
  ['maxAcceptMs', 'longest 202 wait ms'],
  ['acceptRecoveryMs', '202 recovery ms'],
  ['recoveryMs', 'shown recovery ms'],
];

/** Counts that must be 0, and the recovery times held to the goal (marked ✗ when over it). */
const ZERO: (keyof ChaosResult)[] = ['missing', 'duplicates', 'outOfOrder', 'unexpected'];
const RECOVERY: (keyof ChaosResult)[] = ['acceptRecoveryMs', 'recoveryMs'];

/** The report: a Markdown table, one row per scenario; a figure that misses its goal is marked ✗. */
export function table(results: readonly ChaosResult[], recoveryGoalMs: number): string {
  return markdownTable(COLUMNS, results, (result, key) => {
    const value = result[key];
    const bad =
      (ZERO.includes(key) && value !== 0) ||
      (RECOVERY.includes(key) && typeof value === 'number' && value > recoveryGoalMs);
    return bad ? `${String(value)} ✗` : String(value);
  });
}

/**
 * A Markdown table of `rows`, one column per `[key, title]` of `columns` (the first left-aligned, the
 * others right-aligned figures), each cell written by `cell` (default: the value as a string).
 */
export function markdownTable<Row>(
  columns: readonly (readonly [keyof Row, string])[],
  rows: readonly Row[],
  cell: (row: Row, key: keyof Row) => string = (row, key) => String(row[key]),
): string {
  return [
    `| ${columns.map(([, title]) => title).join(' | ')} |`,
    `| ${columns.map((_, i) => (i === 0 ? '---' : '---:')).join(' | ')} |`,
    ...rows.map((row) => `| ${columns.map(([key]) => cell(row, key)).join(' | ')} |`),
  ].join('\n');
}
