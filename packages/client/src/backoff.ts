/** Reconnect delays: full jitter between 0 and `min · 2^attempt`, capped (centrifuge-js's 0.5 → 20 s). */
export interface BackoffOptions {
  /** ms; default 500. */
  minMs?: number;
  /** ms; default 20 000. */
  maxMs?: number;
}

/**
 * The delay before reconnect attempt `attempt` (0 for the first retry): `min + random(0, min(max − min,
 * min · 2^attempt))`. Full jitter spreads a crowd of clients cut at once (a realtime instance restart)
 * over the whole window instead of sending them back in waves.
 */
export function backoffDelay(attempt: number, options: BackoffOptions = {}, random = Math.random): number {
  const min = options.minMs ?? 500;
  const max = options.maxMs ?? 20_000;
  // 2^31 overflows nothing here, but there is no point going past the cap.
  const window = Math.min(max - min, min * 2 ** Math.min(attempt, 30));
  return Math.round(min + random() * Math.max(0, window));
}
