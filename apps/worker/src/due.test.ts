import { describe, expect, it } from 'vitest';
import { earlyByMs } from './due.js';

describe('earlyByMs: how early a delayed job was handed over, by Redis’s clock', () => {
  const createdAt = '2026-01-01T00:00:00.000Z';
  const created = Date.parse(createdAt);

  it('the rest of its delay when handed over before createdAt + delayMs', () => {
    expect(earlyByMs({ createdAt, delayMs: 20_000 }, created + 1000)).toBe(19_000);
  });

  it('0 when due, within 100 ms of due, without a delay or with an unreadable createdAt', () => {
    expect(earlyByMs({ createdAt, delayMs: 20_000 }, created + 20_000)).toBe(0);
    expect(earlyByMs({ createdAt, delayMs: 20_000 }, created + 60_000)).toBe(0);
    expect(earlyByMs({ createdAt, delayMs: 20_000 }, created + 19_950)).toBe(0);
    expect(earlyByMs({ createdAt }, created - 60_000)).toBe(0);
    expect(earlyByMs({ createdAt, delayMs: 0 }, created - 60_000)).toBe(0);
    expect(earlyByMs({ createdAt: 'not a time', delayMs: 20_000 }, created)).toBe(0);
  });
});
