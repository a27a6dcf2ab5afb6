/** Page flows shared by the e2e tests (kept out of *.test.ts files so importing them registers no tests). */
import type { Page } from 'playwright-core';
import path from 'node:path';

/** The project's tiny Gemma 4 fixture (../shared, next to the repository). */
export const FIXTURE = path.resolve('../shared/fixtures/tiny-a');
export const TARGET_DIR = path.join(FIXTURE, 'target');
export const ASSISTANT_DIR = path.join(FIXTURE, 'assistant');

/** Loads a folder through the role's webkitdirectory input and waits for the zone to settle. */
export async function dropFolder(page: Page, role: 'target' | 'assistant', dir: string): Promise<string> {
  const zone = page.getByTestId(`${role}-zone`);
  const before = await zone.getAttribute('data-load-count');
  await page.getByTestId(`${role}-files`).setInputFiles(dir);
  // waitForFunction rather than expect.poll: this also runs in beforeAll, outside a test.
  await page.waitForFunction(
    ([r, b]) => document.querySelector(`[data-testid="${r}-zone"]`)?.getAttribute('data-load-count') !== b,
    [role, before] as const,
    { timeout: 90_000 },
  );
  return (await zone.getAttribute('data-state')) ?? '';
}
