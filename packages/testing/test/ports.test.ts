import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { freeLowPort, freePort, isPortFree } from '../src/ports.js';

/** The first port Linux may give an outgoing connection as its own. */
function ephemeralLow(): number {
  try {
    return Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
  } catch {
    return 32_768;
  }
}

describe('free ports for servers that start later', () => {
  it('are below the ephemeral range, so no outgoing connection takes one before its server listens', async () => {
    const low = ephemeralLow();
    for (let i = 0; i < 40; i++) {
      const port = await freePort();
      expect(port).toBeLessThan(low);
      expect(await isPortFree(port)).toBe(true);
    }
  });

  it('are never handed out twice by one process, pairs included', async () => {
    const seen = new Set<number>();
    for (let i = 0; i < 200; i++) {
      const port = await freePort();
      expect(seen.has(port)).toBe(false);
      seen.add(port);
    }
    for (let i = 0; i < 20; i++) {
      const port = await freeLowPort(6000);
      expect(seen.has(port) || seen.has(port + 6000)).toBe(false);
      seen.add(port);
      seen.add(port + 6000);
    }
  });
});
