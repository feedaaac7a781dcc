import { ErrorCode } from '@herald/protocol';

/** One request of a flood: what a backend sends, with which API key. */
export interface FloodRequest {
  method: 'GET' | 'POST';
  path: string;
  apiKey: string;
  body?: unknown;
}

/**
 * How the fleet answered one request, as the limiter's accounting needs it:
 * - `ok`: a 2xx (the limiter admitted it);
 * - `limited`: a 429 naming the flood's policy;
 * - `limitedByOther`: a 429 naming another policy (not expected: the flood is built so that only its
 *   policy binds);
 * - `limiterDown`: the `closed` failure mode's 503 (`Rate limiter unavailable`): Redis did not answer
 *   the limiter, nothing was admitted;
 * - `afterLimiter`: any other 503 (the queue or the inbox did not answer after the limiter admitted:
 *   its token is spent);
 * - `connectionError`, `other`: the harness's or the gateway's defects.
 */
export type AnswerKind =
  | 'ok'
  | 'limited'
  | 'limitedByOther'
  | 'limiterDown'
  | 'afterLimiter'
  | 'connectionError'
  | 'other';

/** One answer: its kind, when its request left and when its answer arrived (local clock, ms). */
export interface Answer {
  kind: AnswerKind;
  sentAt: number;
  at: number;
}

/** The `closed` failure mode's 503 message (plugins/app/errors.ts `sendRateLimited`). */
const LIMITER_DOWN = 'Rate limiter unavailable';

/**
 * Floods one policy of a fleet of gateways: `perSecond` requests a second (open loop, round-robin over
 * `gateways`, at most `maxInFlight` at once; no retries), each answer classified ({@link AnswerKind}).
 * Far above the policy's rate, so that its bucket never idles.
 */
export class Flood {
  readonly answers: Answer[] = [];
  /** The first few `other` answers, for the failure message. */
  readonly refusals: string[] = [];
  readonly #pending = new Set<Promise<void>>();
  #timer: NodeJS.Timeout | undefined;
  #sent = 0;
  #skipped = 0;

  constructor(
    private readonly options: {
      policy: string;
      gateways: readonly string[];
      perSecond: number;
      maxInFlight: number;
      /** Requests sent at once at the start, before the steady rate (default 0). */
      volley?: number;
      request: (n: number) => FloodRequest;
    },
  ) {}

  /** Starts sending: the first requests (the volley, or one) leave now, not at the first tick. */
  start(): void {
    const startedAt = Date.now();
    const first = Math.max(1, this.options.volley ?? 0);
    const tick = () => {
      const due = Math.floor(((Date.now() - startedAt) * this.options.perSecond) / 1000) + first;
      while (this.#sent + this.#skipped < due) {
        // Over `maxInFlight` (the fleet is slow or away): this one is not sent, the rate is kept.
        if (this.#pending.size >= this.options.maxInFlight) this.#skipped++;
        else this.#track(this.#send(this.#sent++));
      }
    };
    tick();
    this.#timer = setInterval(tick, 10);
  }

  /** Stops sending and waits for every request sent to be answered. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await Promise.all(this.#pending);
  }

  /** Answers of each kind, among those `where` picks (default all). */
  count(kind: AnswerKind, where: (answer: Answer) => boolean = () => true): number {
    let n = 0;
    for (const answer of this.answers) if (answer.kind === kind && where(answer)) n++;
    return n;
  }

  #track(request: Promise<void>): void {
    this.#pending.add(request);
    void request.finally(() => this.#pending.delete(request));
  }

  async #send(n: number): Promise<void> {
    const { gateways, policy } = this.options;
    const sentAt = Date.now();
    let kind: AnswerKind;
    try {
      const response = await send(gateways[n % gateways.length] ?? '', this.options.request(n));
      const text = await response.text();
      kind = classify(response.status, text, policy);
      if (kind === 'other' && this.refusals.length < 5) this.refusals.push(`${response.status} ${text}`);
    } catch {
      kind = 'connectionError';
    }
    this.answers.push({ kind, sentAt, at: Date.now() });
  }
}

/** Sends `request` to the gateway at `url` (5 s at most). */
export function send(url: string, { method, path, apiKey, body }: FloodRequest): Promise<Response> {
  return fetch(`${url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${apiKey}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(5000),
  });
}

function classify(status: number, text: string, policy: string): AnswerKind {
  if (status >= 200 && status < 300) return 'ok';
  if (status !== 429 && status !== 503) return 'other';
  let body: { code?: string; error?: string; policy?: string };
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    return 'other';
  }
  if (status === 429 && body.code === ErrorCode.RATE_LIMITED)
    return body.policy === policy ? 'limited' : 'limitedByOther';
  if (status === 503 && body.code === ErrorCode.UNAVAILABLE)
    return body.error?.startsWith(LIMITER_DOWN) ? 'limiterDown' : 'afterLimiter';
  return 'other';
}
