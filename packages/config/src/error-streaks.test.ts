import { describe, expect, it } from 'vitest';
import { connectionErrorLog } from './error-streaks.js';

describe('connectionErrorLog (a connection error listener that does not flood the log during an outage)', () => {
  it('logs the first error of a streak whole, then one line per interval counting the others', () => {
    const lines: { fields: Record<string, unknown>; message: string }[] = [];
    const log = {
      warn: (fields: Record<string, unknown>, message: string) => lines.push({ fields, message }),
    };
    let now = 1_000_000;
    const listener = connectionErrorLog(
      log,
      'redis connection error',
      { prefix: 'q' },
      { everyMs: 30_000, now: () => now },
    );
    const refused = new Error('connect ECONNREFUSED 127.0.0.1:6379');
    // A reconnect attempt every 500 ms for a minute: 120 errors.
    for (let attempt = 0; attempt < 120; attempt++) {
      listener(refused);
      now += 500;
    }
    expect(lines).toHaveLength(2);
    expect(lines[0]).toEqual({ fields: { prefix: 'q', err: refused }, message: 'redis connection error' });
    expect(lines[1]?.message).toBe('redis connection error (59 more like it since the last line)');
    expect(lines[1]?.fields).toMatchObject({ prefix: 'q', repeated: 59 });
    // A quiet spell, then another error: logged at once, whole.
    now += 60_000;
    listener(refused);
    expect(lines).toHaveLength(3);
    expect(lines[2]?.message).toBe('redis connection error (59 more like it since the last line)');
    now += 60_000;
    listener(refused);
    expect(lines[3]).toEqual({ fields: { prefix: 'q', err: refused }, message: 'redis connection error' });
    // Another error in the streak (a listener naming what is wrong: a database Redis does not have) is
    // logged at once, whole; the streak goes on from it.
    now += 500;
    const named = new Error('REDIS_URL selects database 99, which this Redis does not have');
    listener(named);
    expect(lines[4]).toEqual({ fields: { prefix: 'q', err: named }, message: 'redis connection error' });
    now += 500;
    listener(named);
    expect(lines).toHaveLength(5);
    // Two errors an outage alternates: each its own streak, not a line each time.
    const closed = new Error('Connection is closed.');
    for (let attempt = 0; attempt < 20; attempt++) {
      listener(attempt % 2 === 0 ? refused : closed);
      now += 500;
    }
    expect(lines).toHaveLength(6);
    expect(lines[5]?.fields.err).toBe(closed);
  });
});
