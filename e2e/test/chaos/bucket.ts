/** One write of a token bucket (token-bucket-1.lua's value: struct '<Bddd', format 2). */
export interface BucketWrite {
  /** Microtokens left after the take. */
  micro: number;
  /** The Redis TIME of the decision, µs. */
  tsUs: number;
}

/** A bucket's value as the limiter's scripts write it: format 2, microtokens, ts (µs), expiry (µs). */
export function decodeBucket(stored: Buffer): BucketWrite {
  if (stored.length !== 25 || stored.readUInt8(0) !== 2) throw new Error('not a format-2 token bucket');
  return { micro: stored.readDoubleLE(1), tsUs: stored.readDoubleLE(9) };
}

/** What a bucket's writes say, replayed one take after another. */
export interface Replay {
  /**
   * Tokens taken (cost 1 each). A write is one take or several: the gateway's batch script writes a
   * bucket that several calls of one batch took from once, at the batch's one instant.
   */
  taken: number;
  /** Redis TIME of the first take and of the last, µs. */
  firstUs: number;
  lastUs: number;
  /** Microtokens left after the last take. */
  leftMicro: number;
  /** Microtokens that refilled past the capacity between takes that straddle `window` (an outage). */
  lostInWindowMicro: number;
  /** The same, between every other two takes (the bucket sat full: it was not flooded then). */
  lostElsewhereMicro: number;
  /** Where `lostElsewhereMicro` came from: the Redis TIME of the take after each such gap, and how much. */
  idle: { atUs: number; micro: number }[];
  /**
   * Writes that do not follow from the one before: not (capacity, or the last value refilled at `rate`
   * up to capacity) minus a whole number of tokens, at least one. A second process deciding on a stale
   * value (a double spend) or a bucket reset (lost in a restart) shows here.
   */
  inconsistent: number;
}

/**
 * Replays a token bucket's writes (takes of cost 1, one or more per write, in Redis's order): how many
 * takes, between which Redis times, and whether each write follows from the one before. Rates,
 * capacities and costs in whole tokens make every quantity an integer number of microtokens, so the
 * check is exact.
 */
export function replayBucket(
  writes: readonly BucketWrite[],
  policy: { capacity: number; ratePerSecond: number },
  window?: { fromUs: number; toUs: number },
): Replay {
  const full = policy.capacity * 1_000_000;
  const replay: Replay = {
    taken: 0,
    firstUs: writes[0]?.tsUs ?? 0,
    lastUs: writes.at(-1)?.tsUs ?? 0,
    leftMicro: writes.at(-1)?.micro ?? 0,
    lostInWindowMicro: 0,
    lostElsewhereMicro: 0,
    idle: [],
    inconsistent: 0,
  };
  let before: BucketWrite | undefined;
  for (const write of writes) {
    // Tokens per second are microtokens per µs.
    const refilled =
      before === undefined ? full : before.micro + policy.ratePerSecond * (write.tsUs - before.tsUs);
    const tokens = (Math.min(full, refilled) - write.micro) / 1_000_000;
    if (Number.isInteger(tokens) && tokens >= 1) replay.taken += tokens;
    else replay.inconsistent++;
    if (before !== undefined && refilled > full) {
      const straddles = window !== undefined && before.tsUs <= window.toUs && write.tsUs >= window.fromUs;
      if (straddles) replay.lostInWindowMicro += refilled - full;
      else {
        replay.lostElsewhereMicro += refilled - full;
        replay.idle.push({ atUs: write.tsUs, micro: refilled - full });
      }
    }
    before = write;
  }
  return replay;
}
