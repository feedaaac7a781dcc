import { writeFileSync } from 'node:fs';
import { envKeyId } from '@herald/gateway/operator';
import { DEFAULT_TENANT, userKey } from '@herald/protocol';
import { bucketKey } from '@herald/rate-limiter';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { setsOf } from './aof.js';
import { decodeBucket, replayBucket } from './bucket.js';
import { Flood, type FloodRequest, send } from './flood.js';
import { markdownTable } from './ledger.js';
import { ChaosStack, pause } from './stack.js';

/**
 * Limiter exactness across a fleet (`pnpm test:chaos`): four gateways, each its own OS process, on one
 * `redis-server`, flooded at once on every limit the gateway applies: `recipient` (one hot user, from 8
 * API keys), `sender` (one hot API key, to 1,000 users), `tokens` (`POST /tokens`) and `inbox`
 * (`GET /users/:userId/notifications`), each offered 10× its rate, round-robin over the four gateways.
 * For each policy, what the fleet admitted must be within ±1 of capacity + rate × elapsed, elapsed on
 * the limiter's own clock (Redis `TIME`), also when Redis is stopped and restarted mid-run under the
 * `closed` failure mode.
 *
 * The bound, exactly. A token bucket starts full (capacity C) and gains rate r continuously, capped at
 * C. Flooded, it is never full again after its first take, so nothing is lost to the cap, and it holds
 * less than one token after each take. With T0 the first decision that took from it and T1 a later take
 * that left it under a token, taken = C + r × (T1 − T0) − left, left < 1, so taken is exactly
 * allowed max = ⌊C + r × (T1 − T0)⌋ (difference 0; the test allows ±1). T1 is the last such take before
 * the run's end (the Redis TIME read as the floods stop sending), at most 2 s before it: the takes after
 * it (`taken after T1`: mostly requests still in flight at the end, as demand dies out) count for the
 * HTTP comparison only. Both ends are on the limiter's own clock: every take writes its bucket (the
 * tokens left, and the Redis TIME it was decided at) with one `SET` (the takes of one gateway batch from
 * one bucket, decided at one instant, with one `SET` between them), a denied decision writes nothing,
 * and Redis logs each `SET` in its append-only file (`fsync always`) before it answers. So the AOF
 * (aof.ts) gives every take, answered or not, with T0 and T1; replayed (bucket.ts), it shows that each
 * take follows from the one before (no double spend by two processes, no bucket reset by the restart)
 * and what any refill lost to the cap. Where the bucket sat full for a moment (Redis away, below; or, on
 * a loaded machine, a fleet too starved to ask for a second or two), what refilled past the cap was
 * never there to take, so allowed max = ⌊C + r × (T1 − T0) − lost⌋. Whatever happened, taken may not
 * pass ⌊C + r × (T1 − T0)⌋ (+1); and what was lost outside the outage must stay under one burst (the
 * floods did keep the bucket below its cap). The run also reads Redis TIME just before its first
 * requests: the first take comes some ms later (reported); a bound from that reading instead of T0
 * would have to allow r × that delay.
 *
 * Two counts. `taken` is the limiter's (the AOF's). `admitted` is what the fleet's callers saw: every
 * 2xx, plus every 503 answered after the limiter (the queue or the inbox did not answer after it took
 * the token, around the restart). They differ only by takes whose answer did not come back in time (the
 * limiter's 150 ms timeout on a starved machine, a reply lost as Redis shut down): `closed` answers those
 * 503 too, so admitted ≤ taken ≤ admitted + those 503s.
 *
 * Redis restarted: the bucket (value and expiry) is on disk before any decision is answered and comes
 * back as it was. While Redis is away, `closed` admits nothing and the bucket keeps refilling on Redis's
 * clock (the host's: it does not stop with redis-server), so the first take after the restart finds
 * min(C, what was left + r × the gap). An outage longer than C / r (2 s here; a restart takes 1–4 s on
 * this machine) fills it: what refilled past the cap meanwhile, `lost` = left + r × gap − C, was never
 * there to take, and the bound over the whole run is ⌊C + r × (T1 − T0) − lost⌋, the gap and `left`
 * read from the two takes around the outage. A bucket lost in the restart would instead start full at
 * the first take after it: fine for the count, but the replay flags that take as not following from the
 * one before. The key's TTL plays no part: it expires only once the bucket would be full anyway.
 */
const GATEWAYS = 4;
/** How long each scenario floods the fleet: 60 s, 12 s in CI (`.ci/run` sets CHAOS_FLEET_MS). */
const FLEET_MS = Number(process.env.CHAOS_FLEET_MS ?? (process.env.CI ? 12_000 : 60_000));
/**
 * Every policy's rate (tokens/s) and burst (2 s of rate): low enough that a shared 2-core machine floods
 * all four at 10× through four gateways, answers mostly within the limiter's 150 ms timeout, and drains
 * the first burst within a second (a bucket still near full loses to the cap what refills while a
 * starved fleet does not take it).
 */
const RATE = 10;
const BURST = 2 * RATE;
const OFFERED_PER_SECOND = 10 * RATE;
const MAX_IN_FLIGHT = 32;
/** How long Redis stays stopped in the restart scenario, besides the time it takes to stop and start. */
const REDIS_DOWN_MS = 500;
/**
 * Ten API keys: the first is the hot API key, the next eight send to the hot recipient, the last warms
 * the gateways up (its own buckets) before the run.
 */
const API_KEYS = Array.from({ length: 10 }, (_, i) => `fleet-key-${i + 1}-0123456789abcdef0123456789abcdef`);
/** The id the gateways give the hot key (of `HERALD_API_KEYS`: derived from the key). */
const HOT_KEY_ID = envKeyId(API_KEYS[0] as string);
const HOT_USER = 'hot-user';
const COLD_USERS = 1000;

/** The fleet's settings: every policy at RATE/BURST, `closed` when Redis is away. */
const FLEET_ENV: Record<string, string> = {
  HERALD_API_KEYS: API_KEYS.join(','),
  HERALD_RATE_LIMIT_PER_SECOND: String(RATE),
  HERALD_RATE_LIMIT_BURST: String(BURST),
  HERALD_SENDER_RATE_LIMIT_PER_SECOND: String(RATE),
  HERALD_SENDER_RATE_LIMIT_BURST: String(BURST),
  HERALD_TOKEN_RATE_LIMIT_PER_SECOND: String(RATE),
  HERALD_TOKEN_RATE_LIMIT_BURST: String(BURST),
  HERALD_INBOX_RATE_LIMIT_PER_SECOND: String(RATE),
  HERALD_INBOX_RATE_LIMIT_BURST: String(BURST),
  HERALD_RATE_LIMIT_FAILURE: 'closed',
  HERALD_EXPECTED_GATEWAYS: String(GATEWAYS),
  // No request log: two JSON lines per request, at well over a thousand requests a second, would cost
  // the fleet (and this process, which reads them) more than the requests.
  HERALD_LOG_LEVEL: 'warn',
};

/** One policy's flood: its bucket's Redis key and its requests. */
interface PolicyFlood {
  policy: string;
  bucket: string;
  request: (n: number) => FloodRequest;
}

function policyFloods(prefix: string): PolicyFlood[] {
  const hotKey = API_KEYS[0] ?? '';
  const senders = API_KEYS.slice(1, 9);
  return [
    {
      // Eight senders, each far under its own sender limit (their 10/s of the hot user is split 8 ways,
      // and a decision the recipient denies takes nothing from the sender): only the recipient binds.
      policy: 'recipient',
      bucket: bucketKey(prefix, userKey(DEFAULT_TENANT, HOT_USER)),
      request: (n) => ({
        method: 'POST',
        path: '/notify',
        apiKey: senders[Math.floor(n / GATEWAYS) % senders.length] ?? '',
        body: { userId: HOT_USER, payload: { n } },
      }),
    },
    {
      // 1,000 recipients, each well under its limit: only the sender binds.
      policy: 'sender',
      bucket: bucketKey(`${prefix}sender:`, HOT_KEY_ID),
      request: (n) => ({
        method: 'POST',
        path: '/notify',
        apiKey: hotKey,
        body: { userId: `cold-${n % COLD_USERS}`, payload: { n } },
      }),
    },
    {
      policy: 'tokens',
      bucket: bucketKey(`${prefix}tokens:`, HOT_KEY_ID),
      request: () => ({ method: 'POST', path: '/tokens', apiKey: hotKey, body: { userId: HOT_USER } }),
    },
    {
      policy: 'inbox',
      bucket: bucketKey(`${prefix}inbox:`, HOT_KEY_ID),
      request: () => ({ method: 'GET', path: `/users/${HOT_USER}/notifications?limit=1`, apiKey: hotKey }),
    },
  ];
}

/** One policy's figures: the report table's row. */
interface FleetRow {
  scenario: string;
  policy: string;
  gateways: number;
  runS: number;
  rate: number;
  burst: number;
  /** From the first take to the last, on Redis's clock, in s. */
  elapsedS: string;
  /** From the Redis TIME read before the first request to the first take, in ms. */
  firstTakeMs: number;
  /** ⌊burst + rate × elapsed⌋: what a bucket could give at most, flooded all along. */
  ceiling: number;
  /** ⌊burst + rate × elapsed − lost to the cap⌋: what it could give with the demand it had. */
  allowedMax: number;
  /** Decisions that took a token from T0 to T1: `SET`s of the bucket in Redis's AOF. */
  taken: number;
  /** Takes after T1 (mostly requests still in flight when the floods stopped sending). */
  late: number;
  /** 2xx + 503s after the limiter. */
  admitted: number;
  ok: number;
  afterLimiter: number;
  limited: number;
  limiterDown: number;
  /** Tokens in the bucket after its last take. */
  left: string;
  /** Tokens that refilled past the cap while Redis was away (taken out of the bound). */
  lost: string;
  /** Tokens that refilled past the cap at any other time (the bucket was not flooded then). */
  idle: string;
  /** Takes that do not follow from the one before (see bucket.ts). */
  inconsistent: number;
  /** taken − allowed max. */
  difference: number;
}

const COLUMNS: [keyof FleetRow, string][] = [
  ['scenario', 'scenario'],
  ['policy', 'policy'],
  ['gateways', 'gateways'],
  ['runS', 'run s'],
  ['rate', 'rate/s'],
  ['burst', 'burst'],
  ['elapsedS', 'elapsed s (Redis clock)'],
  ['firstTakeMs', 'first take ms'],
  ['ceiling', 'burst + rate × elapsed'],
  ['lost', 'lost to the cap (outage)'],
  ['idle', 'lost to the cap (elsewhere)'],
  ['allowedMax', 'allowed max'],
  ['taken', 'taken (Redis)'],
  ['late', 'taken after T1'],
  ['admitted', 'admitted (HTTP)'],
  ['ok', '2xx'],
  ['afterLimiter', '503s after the limiter'],
  ['limited', '429s'],
  ['limiterDown', '503s (limiter, closed)'],
  ['left', 'tokens left'],
  ['inconsistent', 'inconsistent takes'],
  ['difference', 'difference'],
];

/** Redis TIME in µs. */
async function redisTimeUs(redis: Redis): Promise<number> {
  const [seconds, micros] = await redis.time();
  return Number(seconds) * 1_000_000 + Number(micros);
}

/** A client that fails fast (the run reads Redis TIME through it around the restart). */
function client(url: string): Redis {
  const redis = new Redis(url, { maxRetriesPerRequest: 1, connectTimeout: 2000 });
  redis.on('error', () => {});
  return redis;
}

/** The Redis outage of the restart scenario. */
interface Outage {
  /** Redis TIME before the stop and after the restart, µs. */
  fromUs: number;
  toUs: number;
  /** Local clock: when redis-server had exited, and when it was started again. */
  stoppedAt: number;
  restartingAt: number;
}

/** One policy's run: its row and what its checks need. */
interface PolicyRun {
  row: FleetRow;
  flood: Flood;
  elapsedUs: number;
  outage: Outage | undefined;
  /** Local clock: when the floods stopped sending. */
  endAt: number;
}

/**
 * Before the clock starts: each gateway has run every route and every limiter script (the warm-up key's
 * own buckets), and `connections` keep-alive connections to it are open, so the first takes come a few
 * ms after the first requests, not after a cold start (a bucket near full loses to the cap meanwhile).
 */
async function warmUp(gateways: readonly string[], connections: number): Promise<void> {
  const apiKey = API_KEYS[9] ?? '';
  const requests: FloodRequest[] = [
    { method: 'POST', path: '/notify', apiKey, body: { userId: 'warm-up', payload: {} } },
    { method: 'POST', path: '/tokens', apiKey, body: { userId: 'warm-up' } },
    { method: 'GET', path: '/users/warm-up/notifications?limit=1', apiKey },
  ];
  await Promise.all(
    gateways.flatMap((url) =>
      Array.from({ length: connections }, async () => {
        for (const request of [...requests, ...requests]) await (await send(url, request)).text();
      }),
    ),
  );
}

/** Floods every policy for FLEET_MS (stopping and restarting Redis at half-time with `restart`). */
async function runFleet(stack: ChaosStack, scenario: string, restart: boolean): Promise<PolicyRun[]> {
  const gateways = stack.urls('gateway');
  const plans = policyFloods(stack.env.HERALD_RATE_LIMIT_PREFIX ?? '');
  await warmUp(gateways, plans.length);
  const clock = client(stack.redis.url);
  await clock.ping();
  const floods = plans.map(
    ({ policy, request }) =>
      new Flood({
        policy,
        gateways,
        perSecond: OFFERED_PER_SECOND,
        maxInFlight: MAX_IN_FLIGHT,
        // The burst and then some, at once: the bucket is drained at the start instead of sitting near
        // full while a starved fleet answers its first requests (it lost up to 1.6 tokens to the cap
        // in the first second at 100/s alone).
        volley: BURST + 10,
        request,
      }),
  );
  const startUs = await redisTimeUs(clock);
  for (const flood of floods) flood.start();
  const startedAt = Date.now();

  let outage: Outage | undefined;
  if (restart) {
    await pause(FLEET_MS / 2);
    const downUs = await redisTimeUs(clock);
    await stack.redis.stop();
    const stoppedAt = Date.now();
    await pause(REDIS_DOWN_MS);
    const restartingAt = Date.now();
    await stack.redis.restart();
    const fresh = client(stack.redis.url);
    const upUs = await redisTimeUs(fresh);
    fresh.disconnect();
    outage = { fromUs: downUs, toUs: upUs, stoppedAt, restartingAt };
  }
  await pause(startedAt + FLEET_MS - Date.now());
  const endAt = Date.now();
  const endUs = await redisTimeUs(clock);
  await Promise.all(floods.map((flood) => flood.stop()));
  clock.disconnect();

  const reader = client(stack.redis.url);
  const [, dir = ''] = (await reader.config('GET', 'dir')) as string[];
  reader.disconnect();
  const writes = setsOf(
    dir,
    plans.map(({ bucket }) => bucket),
  );

  const label = outage
    ? `${scenario} (down ${((outage.toUs - outage.fromUs) / 1e6).toFixed(1)} s, Redis clock)`
    : scenario;
  return plans.map(({ policy, bucket }, i): PolicyRun => {
    const flood = floods[i] as Flood;
    const all = (writes.get(bucket) ?? []).map(decodeBucket);
    // T1: the last take before the end that left the bucket under a token (demand was still flooding
    // it then; a stall of a starved fleet just before the end can leave it more, 3.55 seen).
    const t1 = all.findLastIndex((write) => write.tsUs <= endUs && write.micro < 1_000_000);
    expect(t1, `${policy}: a take that drained the bucket`).toBeGreaterThanOrEqual(0);
    const inRun = all.slice(0, t1 + 1);
    const replay = replayBucket(inRun, { capacity: BURST, ratePerSecond: RATE }, outage);
    const { taken, firstUs, lastUs } = replay;
    const elapsedUs = lastUs - firstUs;
    // In microtokens every term is an integer (integer rate, µs): the floor is exact.
    const ceilingMicro = BURST * 1_000_000 + RATE * elapsedUs;
    for (const { atUs, micro } of replay.idle) {
      const at = ((atUs - firstUs) / 1e6).toFixed(1);
      process.stderr.write(
        `${policy}: ${(micro / 1e6).toFixed(2)} tokens lost to the cap before the take at ${at} s\n`,
      );
    }
    const lostMicro = replay.lostInWindowMicro + replay.lostElsewhereMicro;
    const ok = flood.count('ok');
    const afterLimiter = flood.count('afterLimiter');
    const admitted = ok + afterLimiter;
    const row: FleetRow = {
      scenario: label,
      policy,
      gateways: gateways.length,
      runS: FLEET_MS / 1000,
      rate: RATE,
      burst: BURST,
      elapsedS: (elapsedUs / 1_000_000).toFixed(3),
      firstTakeMs: Math.round((firstUs - startUs) / 1000),
      ceiling: Math.floor(ceilingMicro / 1_000_000),
      allowedMax: Math.floor((ceilingMicro - lostMicro) / 1_000_000),
      taken,
      // Tokens, not writes: a write of the gateway's batch script may carry several takes.
      late: replayBucket(all, { capacity: BURST, ratePerSecond: RATE }, outage).taken - taken,
      admitted,
      ok,
      afterLimiter,
      limited: flood.count('limited'),
      limiterDown: flood.count('limiterDown'),
      left: (replay.leftMicro / 1_000_000).toFixed(2),
      lost: (replay.lostInWindowMicro / 1_000_000).toFixed(2),
      idle: (replay.lostElsewhereMicro / 1_000_000).toFixed(2),
      inconsistent: replay.inconsistent,
      difference: taken - Math.floor((ceilingMicro - lostMicro) / 1_000_000),
    };
    return { row, flood, elapsedUs, outage, endAt };
  });
}

/** One policy's checks: a clean run, flooded to the end, `closed` while Redis was away, the bound. */
function expectExact({ row, flood, elapsedUs, outage, endAt }: PolicyRun): void {
  const { policy, taken, admitted, ceiling, allowedMax } = row;
  expect(flood.refusals, policy).toEqual([]);
  expect(flood.count('other'), `${policy}: other answers`).toBe(0);
  expect(flood.count('connectionError'), `${policy}: connection errors`).toBe(0);
  expect(flood.count('limitedByOther'), `${policy}: 429s naming another policy`).toBe(0);
  // Flooded to the end: refused in the run's last second, and T1 within 2 s of the end.
  expect(
    flood.count('limited', (answer) => answer.at >= endAt - 1000),
    `${policy}: 429s in the last second`,
  ).toBeGreaterThan(0);
  expect(elapsedUs, `${policy}: µs from T0 to T1`).toBeGreaterThan((FLEET_MS - 2000) * 1000);
  // Every take follows from the one before: one bucket, whichever of the four gateways decided.
  expect(row.inconsistent, `${policy}: takes that do not follow from the one before`).toBe(0);
  if (outage) {
    // `closed`: while Redis was away nothing was admitted, and the refusals say why.
    const during = (answer: { sentAt: number; at: number }) =>
      answer.sentAt >= outage.stoppedAt && answer.at <= outage.restartingAt;
    expect(flood.count('ok', during), `${policy}: 2xx while Redis was away`).toBe(0);
    expect(flood.count('afterLimiter', during), `${policy}: admitted while Redis was away`).toBe(0);
    expect(flood.count('limiterDown', during), `${policy}: closed 503s while away`).toBeGreaterThan(0);
  }
  // The limiter's own count: never over burst + rate × elapsed, and within ±1 of the allowed max (0 by
  // the reasoning above).
  expect(taken, `${policy}: taken over burst + rate × elapsed`).toBeLessThanOrEqual(ceiling + 1);
  expect(taken, `${policy}: taken over the allowed max`).toBeLessThanOrEqual(allowedMax + 1);
  expect(taken, `${policy}: taken under the allowed max`).toBeGreaterThanOrEqual(allowedMax - 1);
  // Flooded all along but for moments: what sat at the cap outside the outage is under one burst.
  expect(Number(row.idle), `${policy}: tokens lost to the cap outside the outage`).toBeLessThan(BURST);
  // What callers saw: never more than the limiter took; less only by answers `closed` refused late.
  const takes = taken + row.late;
  expect(admitted, `${policy}: admitted over taken`).toBeLessThanOrEqual(takes);
  expect(takes - admitted, `${policy}: taken without an admitted answer`).toBeLessThanOrEqual(
    row.limiterDown,
  );
}

const rows: FleetRow[] = [];

describe.sequential(`chaos: limiter exactness across ${GATEWAYS} gateways`, () => {
  const stacks: ChaosStack[] = [];
  afterEach(async () => {
    for (const stack of stacks.splice(0)) await stack.dispose();
  });
  afterAll(() => {
    if (rows.length === 0) return;
    const report = markdownTable(COLUMNS, rows);
    process.stderr.write(`\nLimiter exactness (${OFFERED_PER_SECOND}/s offered per policy):\n${report}\n`);
    if (process.env.CHAOS_FLEET_REPORT) writeFileSync(process.env.CHAOS_FLEET_REPORT, `${report}\n`);
  });

  async function startFleet(): Promise<ChaosStack> {
    // No AOF rewrite: setsOf reads the limiter's writes from the append-only files.
    const stack = await ChaosStack.create({
      env: FLEET_ENV,
      redisArgs: ['--auto-aof-rewrite-percentage', '0'],
    });
    stacks.push(stack);
    await Promise.all(Array.from({ length: GATEWAYS }, () => stack.start('gateway')));
    return stack;
  }

  for (const { title, scenario, restart } of [
    {
      title: 'steady flood: every policy within ±1 of burst + rate × elapsed',
      scenario: 'steady',
      restart: false,
    },
    {
      title: `Redis stopped and restarted mid-run (closed failure mode): still within the bound`,
      scenario: 'Redis restarted',
      restart: true,
    },
  ]) {
    it(
      title,
      async () => {
        const stack = await startFleet();
        const runs = await runFleet(stack, scenario, restart);
        rows.push(...runs.map((run) => run.row));
        process.stderr.write(
          `${markdownTable(
            COLUMNS,
            runs.map((run) => run.row),
          )}\n`,
        );
        for (const run of runs) expectExact(run);
      },
      FLEET_MS + 90_000,
    );
  }
});
