import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { setsOf } from './aof.js';
import { type BucketWrite, decodeBucket, replayBucket } from './bucket.js';

/** The fleet scenario's checker, on made-up takes and a made-up append-only file. */
const POLICY = { capacity: 20, ratePerSecond: 10 };
const T0 = 1_700_000_000_000_000;

/** Takes at `offsetsMs` after T0 as the limiter writes them, each from the one before. */
function takes(offsetsMs: readonly number[]): BucketWrite[] {
  const writes: BucketWrite[] = [];
  let micro = POLICY.capacity * 1_000_000;
  let tsUs = T0;
  for (const ms of offsetsMs) {
    const now = T0 + ms * 1000;
    micro = Math.min(POLICY.capacity * 1_000_000, micro + POLICY.ratePerSecond * (now - tsUs)) - 1_000_000;
    tsUs = now;
    writes.push({ micro, tsUs });
  }
  return writes;
}

function packed({ micro, tsUs }: BucketWrite): Buffer {
  const value = Buffer.alloc(25);
  value.writeUInt8(2, 0);
  value.writeDoubleLE(micro, 1);
  value.writeDoubleLE(tsUs, 9);
  value.writeDoubleLE(tsUs + 3_000_000, 17);
  return value;
}

function resp(...argv: (string | Buffer)[]): Buffer {
  const parts: Buffer[] = [Buffer.from(`*${argv.length}\r\n`)];
  for (const arg of argv) {
    const bytes = Buffer.isBuffer(arg) ? arg : Buffer.from(arg);
    parts.push(Buffer.from(`$${bytes.length}\r\n`), bytes, Buffer.from('\r\n'));
  }
  return Buffer.concat(parts);
}

describe('replayBucket', () => {
  it('counts the takes of a flooded bucket, each following from the one before, nothing lost', () => {
    // The burst at once, then one take per 100 ms (10/s) for 2 s.
    const writes = takes([
      ...Array.from({ length: 20 }, () => 0),
      ...Array.from({ length: 20 }, (_, i) => 100 * (i + 1)),
    ]);
    const replay = replayBucket(writes, POLICY);
    expect(replay).toMatchObject({ taken: 40, inconsistent: 0, lostInWindowMicro: 0, lostElsewhereMicro: 0 });
    // ⌊C + r × (T1 − T0)⌋ = ⌊20 + 10 × 2⌋ = 40.
    expect(Math.floor((20e6 + 10 * (replay.lastUs - replay.firstUs)) / 1e6)).toBe(replay.taken);
  });

  it('flags a double spend (a take from a stale value) and a bucket reset', () => {
    const writes = takes([0, 0, 0, 50]);
    const stale = { ...(writes[2] as BucketWrite) };
    expect(replayBucket([...writes.slice(0, 3), stale], POLICY).inconsistent).toBe(1);
    const reset = { micro: 19_000_000, tsUs: T0 + 60_000 };
    expect(replayBucket([...writes, reset], POLICY).inconsistent).toBe(1);
  });

  it('counts a write of several takes at one instant (a batch of calls) as that many; part of a token is not a take', () => {
    const writes = takes([0, 0, 0, 0, 0]);
    // The 2nd, 3rd and 4th takes written once, as the batch script does.
    const batched = [writes[0], writes[3], writes[4]] as BucketWrite[];
    expect(replayBucket(batched, POLICY)).toMatchObject({ taken: 5, inconsistent: 0 });
    const half = { ...(writes[1] as BucketWrite), micro: (writes[1] as BucketWrite).micro + 500_000 };
    expect(replayBucket([writes[0] as BucketWrite, half], POLICY).inconsistent).toBe(1);
  });

  it('splits what refilled past the cap into the outage window and elsewhere', () => {
    // Drained at once, then 3 s with no take (an outage), then 2.5 s with none (idle).
    const writes = takes([...Array.from({ length: 20 }, () => 0), 3000, 5500]);
    const outage = { fromUs: T0 + 500_000, toUs: T0 + 2_900_000 };
    const replay = replayBucket(writes, POLICY, outage);
    expect(replay.inconsistent).toBe(0);
    // 0 + 10 × 3 − 20 = 10 past the cap in the outage; 19 + 10 × 2.5 − 20 = 24 elsewhere.
    expect(replay.lostInWindowMicro).toBe(10_000_000);
    expect(replay.lostElsewhereMicro).toBe(24_000_000);
    expect(replay.idle).toEqual([{ atUs: T0 + 5_500_000, micro: 24_000_000 }]);
  });
});

describe('setsOf', () => {
  let dir: string | undefined;
  afterEach(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("reads every SET of the keys asked for, in the incr files' order, values byte for byte", () => {
    dir = mkdtempSync(join(tmpdir(), 'herald-aof-'));
    mkdirSync(join(dir, 'appendonlydir'));
    const [a, b, c] = takes([0, 10, 20]) as [BucketWrite, BucketWrite, BucketWrite];
    // A value holding CR LF and '*' bytes must not confuse the parser: it goes by lengths.
    const tricky = { micro: 0x0d0a2a24, tsUs: T0 };
    writeFileSync(
      join(dir, 'appendonlydir', 'appendonly.aof.1.incr.aof'),
      Buffer.concat([
        resp('SELECT', '0'),
        resp('MULTI'),
        resp('SET', 'rl:{k}', packed(a), 'PXAT', '1'),
        resp('SET', 'rl:{other}', packed(tricky), 'KEEPTTL'),
        resp('EXEC'),
      ]),
    );
    writeFileSync(
      join(dir, 'appendonlydir', 'appendonly.aof.10.incr.aof'),
      Buffer.concat([resp('set', 'rl:{k}', packed(c), 'KEEPTTL')]),
    );
    writeFileSync(
      join(dir, 'appendonlydir', 'appendonly.aof.2.incr.aof'),
      Buffer.concat([resp('SET', 'rl:{k}', packed(b), 'KEEPTTL'), resp('DEL', 'rl:{k}')]),
    );
    const sets = setsOf(dir, ['rl:{k}', 'rl:{other}']);
    expect(sets.get('rl:{k}')?.map(decodeBucket)).toEqual([a, b, c]);
    expect(sets.get('rl:{other}')?.map(decodeBucket)).toEqual([tricky]);
  });
});
