import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script, no types
import { measure } from '../scripts/size.mjs';

/** Issue 11's budget for the embeddable inbox: at most 35 KB min+gzip (35 000 bytes: the stricter reading). */
const BUDGET_GZIP_BYTES = 35_000;

describe('size budget', () => {
  it('<herald-inbox> (Preact, @herald/client with socket.io-client, the styles) is at most 35 KB min+gzip', () => {
    const { element, pages } = measure() as Record<
      'element' | 'pages',
      { minBytes: number; gzipBytes: number }
    >;
    console.log(
      `<herald-inbox>: ${element.minBytes} B min, ${element.gzipBytes} B min+gzip (budget ${BUDGET_GZIP_BYTES}); ` +
        `the pages' scripts: ${pages.minBytes} B min, ${pages.gzipBytes} B min+gzip`,
    );
    expect(element.gzipBytes).toBeLessThanOrEqual(BUDGET_GZIP_BYTES);
  });
});
