import { ReplicaWaitError } from '@herald/config';
import { InboxError, InboxErrorCode } from '@herald/inbox';
import { ReplyError } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { isTransientStoreError } from './store-retry.js';

describe('isTransientStoreError', () => {
  it('is true for what Redis cannot take now: failovers, restarts, a busy or full Redis, a lost connection', () => {
    for (const message of [
      'CLUSTERDOWN The cluster is down',
      'TRYAGAIN Multiple keys request during rehashing of slot',
      'LOADING Redis is loading the dataset in memory',
      "READONLY You can't write against a read only replica.",
      'MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to no',
      'BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.',
      "OOM command not allowed when used memory > 'maxmemory'.",
    ]) {
      expect(isTransientStoreError(new ReplyError(message)), message).toBe(true);
    }
    expect(
      isTransientStoreError(
        new Error('Too many Cluster redirections. Last error: Error: Connection is closed.'),
      ),
    ).toBe(true);
    expect(isTransientStoreError(new Error('Connection is closed.'))).toBe(true);
    expect(isTransientStoreError(new Error('Command timed out'))).toBe(true);
    expect(isTransientStoreError(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }))).toBe(
      true,
    );
    expect(isTransientStoreError(new Error('wrapped', { cause: new ReplyError('TRYAGAIN later') }))).toBe(
      true,
    );
  });

  it('is false for a refusal of the data itself, which a retry would meet again, and for a missed replica wait', () => {
    expect(
      isTransientStoreError(
        new ReplyError('WRONGTYPE Operation against a key holding the wrong kind of value'),
      ),
    ).toBe(false);
    expect(isTransientStoreError(new ReplyError('ERR Error running script'))).toBe(false);
    expect(isTransientStoreError(new ReplyError('NOPERM this user has no permissions'))).toBe(false);
    expect(isTransientStoreError(new InboxError(InboxErrorCode.INVALID_ARGUMENT, 'userId is required'))).toBe(
      false,
    );
    expect(isTransientStoreError('CLUSTERDOWN')).toBe(false);
    // The append was done: only the wait for replicas is retried, by BullMQ, as before.
    expect(isTransientStoreError(new ReplicaWaitError(1, 0, 1000))).toBe(false);
  });
});
