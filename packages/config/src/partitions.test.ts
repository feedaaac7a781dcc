import calculateSlot from 'cluster-key-slot';
import { describe, expect, it } from 'vitest';
import { jobCountsOf, partitionOf, partitionShare, queuePartitions, queueSlotKey } from './partitions.js';

const QUEUE = { name: 'notifications', prefix: '{herald}' };

/** The masters' slot ranges as `redis-cli --cluster create` assigns them to `masters` masters. */
function masterOf(slot: number, masters: number): number {
  // Master m serves [floor(m * 16384 / masters), floor((m + 1) * 16384 / masters) - 1] (0-5460, 5461-10922, …).
  for (let master = masters - 1; master >= 0; master--) {
    if (slot >= Math.floor((master * 16384) / masters)) return master;
  }
  return 0;
}

describe('queuePartitions', () => {
  it('is the queue itself with one partition, and keeps it as partition 0 with more', () => {
    expect(queuePartitions({ ...QUEUE, partitions: 1 })).toEqual([QUEUE]);
    expect(queuePartitions({ ...QUEUE, partitions: 6 })[0]).toEqual(QUEUE);
  });

  it.each([
    [3, 3],
    [6, 3],
    [12, 3],
    [4, 4],
    [12, 6],
    [64, 8],
  ])(
    '%i partitions put exactly as many on each of %i masters, each in a slot of its own',
    (count, masters) => {
      const partitions = queuePartitions({ ...QUEUE, partitions: count });
      expect(partitions).toHaveLength(count);
      const slots = partitions.map((partition) => calculateSlot(queueSlotKey(partition)));
      expect(new Set(slots).size).toBe(count);
      const perMaster = Array.from({ length: masters }, () => 0);
      for (const slot of slots)
        perMaster[masterOf(slot, masters)] = (perMaster[masterOf(slot, masters)] ?? 0) + 1;
      expect(perMaster).toEqual(Array.from({ length: masters }, () => count / masters));
    },
  );

  it('keeps every BullMQ key of a partition in one slot (the tag is all that changes)', () => {
    for (const { prefix } of queuePartitions({ ...QUEUE, partitions: 5 })) {
      expect(prefix).toMatch(/^\{herald(-\d+)*\}$/);
      expect(calculateSlot(`${prefix}:notifications:wait`)).toBe(calculateSlot(`${prefix}:notifications:id`));
    }
  });

  it('changes only the tag of a prefix with text around it, and suffixes one without a tag', () => {
    const tagged = queuePartitions({ name: 'n', prefix: 'app:{q}:x', partitions: 2 });
    expect(tagged[1]?.prefix).toMatch(/^app:\{q-1(-\d+)?\}:x$/);
    expect(queuePartitions({ name: 'n', prefix: 'bull', partitions: 3 }).map((p) => p.prefix)).toEqual([
      'bull',
      'bull-1',
      'bull-2',
    ]);
  });

  it('is the same for the same settings (every app computes the same names)', () => {
    expect(queuePartitions({ ...QUEUE, partitions: 24 })).toEqual(
      queuePartitions({ ...QUEUE, partitions: 24 }),
    );
  });

  it('refuses a count out of range', () => {
    expect(() => queuePartitions({ ...QUEUE, partitions: 0 })).toThrow(RangeError);
    expect(() => queuePartitions({ ...QUEUE, partitions: 1025 })).toThrow(/1 to 1024/);
  });
});

describe('partitionOf', () => {
  it('puts a user always in the same partition, within range, and users across all of them', () => {
    const seen = new Set<number>();
    for (let user = 0; user < 600; user++) {
      const partition = partitionOf('acme', `user-${user}`, 6);
      expect(partition).toBe(partitionOf('acme', `user-${user}`, 6));
      expect(partition).toBeGreaterThanOrEqual(0);
      expect(partition).toBeLessThan(6);
      seen.add(partition);
    }
    expect(seen.size).toBe(6);
    expect(partitionOf('acme', 'anyone', 1)).toBe(0);
  });

  it('spreads users evenly (each partition within 15 % of its share of 6,000 users)', () => {
    const counts = Array.from({ length: 6 }, () => 0);
    for (let user = 0; user < 6000; user++) {
      const partition = partitionOf('acme', `u${user}`, 6);
      counts[partition] = (counts[partition] ?? 0) + 1;
    }
    for (const count of counts) expect(Math.abs(count - 1000)).toBeLessThan(150);
  });
});

describe('partitionShare', () => {
  it('reads all, indexes and ranges, in order without repeats', () => {
    expect(partitionShare('all', 4)).toEqual([0, 1, 2, 3]);
    expect(partitionShare('', 2)).toEqual([0, 1]);
    expect(partitionShare('5, 0-2,1', 8)).toEqual([0, 1, 2, 5]);
  });

  it('names what is wrong', () => {
    expect(() => partitionShare('4', 4)).toThrow(/partition 4 does not exist.*0 to 3/);
    expect(() => partitionShare('3-1', 4)).toThrow(/ends before it starts/);
    expect(() => partitionShare('one', 4)).toThrow(/"one" is not a partition index/);
  });
});

describe('jobCountsOf', () => {
  it('sums the counts of every partition', async () => {
    const queue = (counts: Record<string, number>) => ({ getJobCounts: async () => counts });
    expect(await jobCountsOf([queue({ waiting: 2, failed: 1 }), queue({ waiting: 3 })])).toEqual({
      waiting: 5,
      failed: 1,
    });
  });

  it("counts BullMQ's prioritized jobs as waiting (every Herald job has a priority)", async () => {
    const queue = (counts: Record<string, number>) => ({ getJobCounts: async () => counts });
    expect(
      await jobCountsOf([queue({ waiting: 0, prioritized: 4, delayed: 1 }), queue({ prioritized: 2 })]),
    ).toEqual({ waiting: 6, delayed: 1 });
  });
});
