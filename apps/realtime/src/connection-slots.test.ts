import { describe, expect, it } from 'vitest';
import { ConnectionSlots } from './connection-slots.js';

describe('ConnectionSlots', () => {
  it('holds a slot per connected socket, up to the limit, and gives it back once', () => {
    const slots = new ConnectionSlots(2);
    expect(slots.take('alice', 's1')).toBe(true);
    expect(slots.take('alice', 's1')).toBe(true); // the same socket twice is one slot
    expect(slots.take('alice', 's2')).toBe(true);
    expect(slots.isFull('alice')).toBe(true);
    expect(slots.take('alice', 's3')).toBe(false);
    expect(slots.take('bob', 's4')).toBe(true);
    slots.release('alice', 's1');
    slots.release('alice', 's1');
    slots.release('alice', 'never-connected');
    expect(slots.count('alice')).toBe(1);
    expect(slots.take('alice', 's3')).toBe(true);
    slots.release('alice', 's2');
    slots.release('alice', 's3');
    expect(slots.count('alice')).toBe(0);
  });
});
