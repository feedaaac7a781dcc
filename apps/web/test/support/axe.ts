import { createRequire } from 'node:module';
import type { Page } from 'playwright-core';

const require = createRequire(import.meta.url);

/** One axe-core finding, as a test prints it. */
export interface AxeViolation {
  id: string;
  impact: string;
  help: string;
  targets: unknown[];
}

/** axe-core's violations on `page` (WCAG 2.x A and AA, and best practice): `[]` when there is none. */
export async function axeViolations(page: Page): Promise<AxeViolation[]> {
  await page.addScriptTag({ path: require.resolve('axe-core/axe.min.js') });
  return page.evaluate(async () => {
    const { axe } = window as unknown as {
      axe: { run(context: Document, options: unknown): Promise<{ violations: unknown[] }> };
    };
    const result = await axe.run(document, {
      runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] },
    });
    return result.violations.map((violation) => {
      const { id, impact, help, nodes } = violation as {
        id: string;
        impact: string;
        help: string;
        nodes: { target: unknown }[];
      };
      return { id, impact, help, targets: nodes.map((node) => node.target) };
    });
  });
}
