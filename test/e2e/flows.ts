/** Page flows shared by the e2e tests (kept out of *.test.ts files so importing them registers no tests). */
import type { Page } from 'playwright-core';
import path from 'node:path';
import { expect } from 'vitest';

/** The project's tiny Gemma 4 fixture (tools/make_tiny_a_fixture.py). */
export const FIXTURE = path.resolve('test/fixtures/tiny-a');
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

/** Generous: SwiftShader on a 2-core machine shared with other test suites. */
export const RUN_MS = 480_000;
export const TEST_MS = 600_000;

export type JobKind = 'probe' | 'trace' | 'generate';

/**
 * Clicks Run for `kind` and waits (RUN_MS at most) until the run has settled: its elapsed line reads "Done in",
 * "Failed after" or "Cancelled after" and Run is enabled again. Checks no error; see runJob for that.
 */
export async function runJobSettled(page: Page, kind: JobKind): Promise<void> {
  const run = page.getByTestId(`run-${kind}`);
  const elapsed = page.getByTestId(`${kind}-elapsed`);
  // Blank the elapsed line first: it ends "Done in", "Failed after" or "Cancelled after" only once this run has
  // settled (a refusal settles within milliseconds, too fast to see Run disabled by polling).
  await elapsed.evaluate((e) => {
    e.textContent = '';
  });
  await run.click();
  await expect
    .poll(() => elapsed.textContent(), { timeout: RUN_MS })
    .toMatch(/^(Done in|Failed after|Cancelled after) /);
  await expect.poll(() => run.isEnabled()).toBe(true);
}

/** The `kind` panel shows no error (the failure message is the error text). */
export async function noJobError(page: Page, kind: JobKind): Promise<void> {
  const err = page.getByTestId(`${kind}-error`);
  expect(await err.count(), (await err.allTextContents()).join()).toBe(0);
}

/** runJobSettled, then noJobError: the run settled without an error. */
export async function runJob(page: Page, kind: JobKind): Promise<void> {
  await runJobSettled(page, kind);
  await noJobError(page, kind);
}

/**
 * Runs the probe under `policy` from the Probe tab; checks it ran without error and the provenance names the
 * policy. Returns the verdict ('equal', 'diverges', ...).
 */
export async function runProbe(page: Page, policy: string): Promise<string> {
  await page.getByTestId('tab-probe').click();
  await page.getByTestId('policy').selectOption(policy);
  await runJob(page, 'probe');
  expect(await page.getByTestId('provenance').textContent()).toContain(`Policy${policy}`);
  return (await page.getByTestId('verdict').getAttribute('data-verdict')) ?? '';
}

/** Opens the Generate tab and fills the form: `prompt`, `maxNew` new tokens, K = 4, policy exact. */
export async function fillGeneration(page: Page, prompt: number[], maxNew: number): Promise<void> {
  await page.getByTestId('tab-generate').click();
  await page.getByTestId('generate-prompt').fill(prompt.join(', '));
  await page.getByTestId('generate-max-new').fill(String(maxNew));
  await page.getByTestId('generate-block').selectOption('4');
  await page.getByTestId('generate-policy').selectOption('exact');
}

/** The token ids shown in the token strip `testid`. */
export const tokensOf = async (page: Page, testid: string): Promise<number[]> =>
  (await page.getByTestId(testid).locator('.tok').allTextContents()).map(Number);

/**
 * The probe under exact passes on the loaded checkpoint: verdict equal, "probe passed: 4 draws", MTP would be
 * enabled, 4 equal draws.
 */
export async function expectProbeExactPasses(page: Page): Promise<void> {
  expect(await runProbe(page, 'exact')).toBe('equal');
  expect(await page.getByTestId('summary').textContent()).toMatch(/^block-versus-chain probe passed: 4 draws/);
  expect(await page.getByTestId('consequence').textContent()).toBe('MTP would be enabled');
  expect(await page.getByTestId('draws').locator('li.equal').count()).toBe(4);
}

/**
 * Generates `maxNew` tokens after `prompt` (K = 4, exact, the loaded drafter) without error, and the page says MTP
 * output is identical to classic greedy decode: `maxNew` tokens, same SHA-256.
 */
export async function expectGenerationIdentical(page: Page, prompt: number[], maxNew: number): Promise<void> {
  await fillGeneration(page, prompt, maxNew);
  await runJob(page, 'generate');
  expect(await page.getByTestId('generation-verdict').getAttribute('data-verdict')).toBe('identical');
  expect(await page.getByTestId('generation-summary').textContent()).toBe(
    `MTP output is identical to classic greedy decode: ${maxNew} tokens, same SHA-256`,
  );
}

/** The finished progress list of `kind`: [phase name, time] per line. */
/**
 * The finished progress list after its exactness self-test line, which leads it when the run was the page's first
 * verdict (the self-test ran then, before the run's own phases; its time is its own, not one of the report's).
 */
export async function runPhaseTimes(page: Page, kind: JobKind): Promise<[string, string][]> {
  const rows = await progressTimes(page, kind);
  if (rows[0]?.[0] !== 'exactness self-test of this adapter') return rows;
  expect(rows[0][1]).toMatch(/^\d/);
  return rows.slice(1);
}

export const progressTimes = (page: Page, kind: JobKind): Promise<[string, string][]> =>
  page
    .getByTestId(`${kind}-progress`)
    .locator('li')
    .evaluateAll((li) =>
      li.map((l) => [
        l.querySelector('.phase-name')?.textContent ?? '',
        l.querySelector('.phase-time')?.textContent ?? '',
      ]),
    ) as Promise<[string, string][]>;
