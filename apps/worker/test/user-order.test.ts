import { waitFor } from '@herald/testing';
import { describe, expect, it } from 'vitest';
import { LaneHeldError, UserOrder } from '../src/user-order.js';

describe('UserOrder', () => {
  it('runs one key’s tasks one at a time in send order, whatever order they came in within a turn', async () => {
    const order = new UserOrder();
    const log: string[] = [];
    let running = 0;
    let most = 0;
    const task = (name: string) => async () => {
      running++;
      most = Math.max(most, running);
      log.push(`start ${name}`);
      await new Promise((resolve) => setImmediate(resolve));
      log.push(`end ${name}`);
      running--;
      return name;
    };
    const results = await Promise.all([
      order.run('alice', [1000, 3], task('a3')),
      order.run('alice', [1000, 1], task('a1')),
      order.run('alice', [999, 9], task('a0')),
      order.run('alice', [1000, 2], task('a2')),
    ]);
    expect(results).toEqual(['a3', 'a1', 'a0', 'a2']);
    expect(log.filter((line) => line.startsWith('start'))).toEqual([
      'start a0',
      'start a1',
      'start a2',
      'start a3',
    ]);
    expect(most).toBe(1);
    expect(order.size).toBe(0);
  });

  it('a higher priority (a smaller number) goes ahead of the key’s waiting tasks sent before it; send order within a priority', async () => {
    const order = new UserOrder();
    const started: string[] = [];
    const task = (name: string) => async () => {
      started.push(name);
      await new Promise((resolve) => setImmediate(resolve));
      return name;
    };
    // Taken together (a backlog): the envelopes' sends without priority, then a priority-1 send.
    await Promise.all([
      order.run('alice', [1000, 1], task('plain-1')),
      order.run('alice', [1000, 2], task('plain-2')),
      order.run('alice', [1005, 1, 5], task('p5')),
      order.run('alice', [1010, 1, 1], task('p1-late')),
      order.run('alice', [1001, 1, 1], task('p1-early')),
    ]);
    expect(started).toEqual(['p1-early', 'p1-late', 'p5', 'plain-1', 'plain-2']);
  });

  it('runs different keys side by side, and a failed task does not hold back the next', async () => {
    const order = new UserOrder();
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const bob = order.run('bob', [1, 0], () => held.then(() => 'bob'));
    // Carol's task runs while Bob's is still waiting.
    expect(await order.run('carol', [1, 0], async () => 'carol')).toBe('carol');
    release();
    expect(await bob).toBe('bob');
    await expect(order.run('dave', [1, 0], () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(await order.run('dave', [2, 0], async () => 'after')).toBe('after');
    await waitFor(() => order.size === 0, { what: 'every lane closed' });
  });

  it('a task failing with an error that holds its lane fails the tasks waiting behind it, unrun; later ones run', async () => {
    const order = new UserOrder({ holds: (error) => error instanceof Error && error.message === 'held' });
    const ran: string[] = [];
    const task = (name: string, fail?: string) => async () => {
      ran.push(name);
      if (fail !== undefined) throw new Error(fail);
      return name;
    };
    const results = await Promise.allSettled([
      order.run('erin', [1, 1], task('e1', 'held')),
      order.run('erin', [1, 2], task('e2')),
      order.run('erin', [1, 3], task('e3')),
      order.run('frank', [1, 1], task('f1')),
    ]);
    expect(ran.sort()).toEqual(['e1', 'f1']);
    expect(results.map((result) => result.status)).toEqual(['rejected', 'rejected', 'rejected', 'fulfilled']);
    const [, second] = results;
    expect(second?.status === 'rejected' && second.reason).toBeInstanceOf(LaneHeldError);
    expect(await order.run('erin', [1, 4], task('e4'))).toBe('e4');
    // Any other failure holds nothing back.
    const other = await Promise.allSettled([
      order.run('erin', [2, 1], task('e5', 'boom')),
      order.run('erin', [2, 2], task('e6')),
    ]);
    expect(other.map((result) => result.status)).toEqual(['rejected', 'fulfilled']);
    await waitFor(() => order.size === 0, { what: 'every lane closed' });
  });
});
