import type { AdminSnapshot } from '@herald/protocol';
import { describe, expect, it } from 'vitest';
import { addSnapshot, emptyHistory, HISTORY_SECONDS, userLabel } from './history.js';

/** A snapshot read at unix second `second` with these hot users' levels (null: not read). */
function at(second: number, levels: Record<string, number | null>): AdminSnapshot {
  return {
    at: new Date(second * 1000 + 250).toISOString(),
    hotUsers: Object.entries(levels).map(([userId, remaining]) => ({
      tenantId: 'default',
      userId,
      decisions: 1,
      denied: 0,
      tokens: remaining === null ? null : { remaining, limit: 10, fullInMs: 0 },
    })),
  } as AdminSnapshot;
}

describe('the token level history', () => {
  it('appends one sample per second per hot user, null where a user was not hot', () => {
    let history = emptyHistory();
    history = addSnapshot(history, at(100, { alice: 10 }));
    history = addSnapshot(history, at(101, { alice: 4, bob: 9 }));
    history = addSnapshot(history, at(102, { bob: 8, carol: null }));
    expect(history.seconds).toEqual([100, 101, 102]);
    expect(history.levels.get('alice')).toEqual([10, 4, null]);
    expect(history.levels.get('bob')).toEqual([null, 9, 8]);
    // carol was hot, but her bucket was never read: nothing to draw.
    expect(history.levels.has('carol')).toBe(false);
    expect(history.limits.get('alice')).toBe(10);
  });

  it('replaces a second sent twice (a reconnect) and keeps the last minute only', () => {
    let history = addSnapshot(addSnapshot(emptyHistory(), at(100, { alice: 5 })), at(100, { alice: 3 }));
    expect(history.seconds).toEqual([100]);
    expect(history.levels.get('alice')).toEqual([3]);
    for (let second = 101; second < 101 + HISTORY_SECONDS + 5; second++) {
      history = addSnapshot(history, at(second, second < 103 ? { alice: 1 } : { bob: 2 }));
    }
    expect(history.seconds).toHaveLength(HISTORY_SECONDS);
    expect(history.seconds.at(-1)).toBe(100 + HISTORY_SECONDS + 5);
    // alice was last hot more than a minute ago: forgotten.
    expect([...history.levels.keys()]).toEqual(['bob']);
    expect(history.levels.get('bob')).toHaveLength(HISTORY_SECONDS);
  });

  it('labels users of the default tenant by their id, others as tenant/user', () => {
    expect(userLabel({ tenantId: 'default', userId: 'alice' })).toBe('alice');
    expect(userLabel({ tenantId: 'acme', userId: 'org/bob' })).toBe('acme/org/bob');
  });
});
