import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script, no types
import { measure } from '../scripts/size.mjs';

/** The budget of issue 11: at most 20 KB min+gzip, socket.io-client included (20 000 bytes: the stricter reading). */
const BUDGET_GZIP_BYTES = 20_000;

describe('size budget', () => {
  it('the browser client (createHeraldClient, socket.io-client included) is at most 20 KB min+gzip', async () => {
    const { minBytes, gzipBytes } = (await measure()) as { minBytes: number; gzipBytes: number };
    console.log(`@herald/client: ${minBytes} B min, ${gzipBytes} B min+gzip (budget ${BUDGET_GZIP_BYTES})`);
    expect(gzipBytes).toBeLessThanOrEqual(BUDGET_GZIP_BYTES);
  });
});
