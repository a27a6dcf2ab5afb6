/**
 * The trace and the generation runs on the real engine in Chromium (WebGPU on SwiftShader), fixture
 * folders loaded: trace with `exact` (equal, no disagreement) and `ring-chronological` (diverges, chart),
 * its JSON and share link; Cancel; generation classic vs MTP with K = 4 under `exact` (identical, counters).
 * Then the generation view's "differs" rendering with a made-up result (no policy of the tiny model
 * changes its greedy tokens).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { readFileSync } from 'node:fs';
import { newPage, pageErrors, screenshot, useServerAndBrowser } from './harness.ts';
import { ASSISTANT_DIR, dropFolder, runPhaseTimes, TARGET_DIR } from './flows.ts';
import { validateReport } from '../../src/parity/report.ts';
import type { TraceReport } from '../../src/parity/trace.ts';
import { expectedBuckets, expectedMetrics, shownBuckets, shownMetrics } from './trace-expect.ts';

/** Generous: SwiftShader on a busy 2-core machine (see probe.test.ts). */
const RUN_MS = 480_000;
const TEST_MS = 600_000;

async function runTrace(page: Page, policy: string): Promise<string> {
  await page.getByTestId('tab-trace').click();
  await page.getByTestId('trace-policy').selectOption(policy);
  const run = page.getByTestId('run-trace');
  await run.click();
  await expect.poll(() => run.isDisabled()).toBe(true);
  await expect.poll(() => run.isEnabled(), { timeout: RUN_MS }).toBe(true);
  expect(
    await page.getByTestId('trace-error').count(),
    (await page.getByTestId('trace-error').allTextContents()).join(),
  ).toBe(0);
  expect(await page.getByTestId('trace-provenance').textContent()).toContain(`Policy${policy}`);
  return (await page.getByTestId('trace-verdict').getAttribute('data-verdict')) ?? '';
}

describe('trace and generation in the page on the fixture model', () => {
  const env = useServerAndBrowser();
  let page: Page;
  beforeAll(async () => {
    page = await newPage(env.browser, env.url);
    expect(await dropFolder(page, 'target', TARGET_DIR)).toBe('loaded');
    expect(await dropFolder(page, 'assistant', ASSISTANT_DIR)).toBe('loaded');
  });

  it(
    'trace defaults come from the 16-slot window; exact: every row equal, no disagreement',
    async () => {
      await page.getByTestId('tab-trace').click();
      expect(await page.getByTestId('trace-prefix').inputValue()).toBe('40');
      expect(await page.getByTestId('trace-traced').inputValue()).toBe('48');
      expect(await page.getByTestId('trace-hint').textContent()).toMatch(/16-slot window: prefix 40, traced 48/);
      expect(await runTrace(page, 'exact')).toBe('equal');
      expect(await page.getByTestId('report-title').textContent()).toBe('Teacher-forced trace report');
      expect(await page.getByTestId('trace-summary').textContent()).toBe(
        'teacher-forced trace: all 48 block rows equal the chain byte for byte',
      );
      const m = await shownMetrics(page);
      expect(m.top1Disagreements).toBe('0 of 48');
      expect(m.rowsByteEqual).toBe('48 of 48');
      expect(m.deltaMax).toBe('0');
      expect(await page.getByTestId('trace-no-disagreement').textContent()).toMatch(/at all 48 traced positions/);
      expect(await page.getByTestId('trace-chart-note').textContent()).toMatch(/exactly 0 at all 48 positions/);
      expect(await page.getByTestId('trace-chart').isVisible()).toBe(true);
      // The finished list reads the report's timings: prefill, chain and block as its Timings say, "Done in" its Total.
      const [prefill, chain, block, total] = await page.getByTestId('trace-timings').locator('dd').allTextContents();
      expect(await runPhaseTimes(page, 'trace')).toEqual([
        ['prefill', prefill],
        ['chain', chain],
        ['block', block],
      ]);
      expect(await page.getByTestId('trace-elapsed').textContent()).toBe(`Done in ${total}`);
      await screenshot(page, '14-trace-exact');
      expect(pageErrors(page)).toEqual([]);
    },
    TEST_MS,
  );

  it(
    'ring-chronological: rows differ, the chart shows |Δ logit| per position; JSON and link carry it',
    async () => {
      expect(await runTrace(page, 'ring-chronological')).toBe('diverges');
      expect(await page.getByTestId('trace-summary').textContent()).toMatch(
        /^teacher-forced trace: \d+ of 48 rows differ; \d+ top-1 disagreements, \d+ on \d+ decided positions \(gap >= 2\)$/,
      );
      const chart = page.getByTestId('trace-chart');
      expect(await chart.isVisible()).toBe(true);
      expect((await chart.boundingBox())!.width).toBeGreaterThan(600);
      expect(await page.getByTestId('trace-readout').textContent()).toMatch(
        /^position \d+ · next token \d+ · chain top-1 /,
      );

      const [json] = await Promise.all([page.waitForEvent('download'), page.getByTestId('download-json').click()]);
      expect(json.suggestedFilename()).toMatch(
        /^ringside-trace-diverges-ring-chronological-f32-K4-P40-T48-[0-9a-f]{12}\.json$/,
      );
      const report = JSON.parse(readFileSync((await json.path())!, 'utf8')) as TraceReport;
      expect(validateReport(report)).toEqual([]);
      expect(report.kind).toBe('trace');
      expect(report.provenance.prefix).toBe(40);
      expect(report.positions.length).toBe(48);
      expect(await shownMetrics(page)).toMatchObject(expectedMetrics(report));
      expect(await shownBuckets(page)).toEqual(expectedBuckets(report));
      await screenshot(page, '15-trace-diverges');

      await page.getByTestId('copy-link').click();
      const field = page.getByTestId('share-link');
      await expect.poll(() => field.inputValue()).toMatch(/#report=[A-Za-z0-9_-]+$/);
      const fresh = await newPage(env.browser, await field.inputValue());
      await expect
        .poll(() => fresh.getByTestId('trace-verdict').getAttribute('data-verdict'), { timeout: 30_000 })
        .toBe('diverges');
      expect(await fresh.getByTestId('trace-summary').textContent()).toBe(report.summary);
      expect(await shownMetrics(fresh)).toMatchObject(expectedMetrics(report));
      expect(pageErrors(fresh)).toEqual([]);
      await fresh.close();
      expect(pageErrors(page)).toEqual([]);
    },
    TEST_MS,
  );

  it(
    'Cancel stops a running trace and the report shown stays',
    async () => {
      await page.getByTestId('tab-trace').click();
      await page.getByTestId('trace-traced').fill('2000');
      await page.getByTestId('trace-policy').selectOption('exact');
      await page.getByTestId('run-trace').click();
      // One run at a time: the other forms cannot start meanwhile.
      await page.getByTestId('tab-probe').click();
      expect(await page.getByTestId('run-probe').isDisabled()).toBe(true);
      expect(await page.getByTestId('run-why').textContent()).toBe('Another run is in progress.');
      await page.getByTestId('tab-trace').click();
      await expect
        .poll(() => page.getByTestId('trace-progress').locator('li').count(), { timeout: RUN_MS })
        .toBeGreaterThan(0);
      await page.getByTestId('trace-cancel').click();
      await expect
        .poll(() => page.getByTestId('trace-elapsed').textContent(), { timeout: RUN_MS })
        .toMatch(/^Cancelled after /);
      expect(await page.getByTestId('trace-error').count()).toBe(0);
      expect(await page.getByTestId('run-trace').isEnabled()).toBe(true);
      expect(await page.getByTestId('trace-verdict').getAttribute('data-verdict')).toBe('diverges');
      await page.getByTestId('trace-traced').fill('48');
      expect(pageErrors(page)).toEqual([]);
    },
    TEST_MS,
  );

  it(
    'generation, K = 4, exact: MTP identical to classic, counters, speed and digests shown',
    async () => {
      await page.getByTestId('tab-generate').click();
      // The fixture has no tokenizer.json: token ids only.
      expect(await page.getByTestId('generate-prompt-text').isDisabled()).toBe(true);
      expect(await page.getByTestId('generate-tokenizer-note').textContent()).toMatch(
        /no tokenizer\.json: token ids only/,
      );
      await page.getByTestId('generate-max-new').fill('16');
      await page.getByTestId('generate-block').selectOption('4');
      await page.getByTestId('generate-policy').selectOption('exact');
      // A bad prompt is refused in place, before any work.
      await page.getByTestId('generate-prompt').fill('2, 105, 99999');
      await page.getByTestId('run-generate').click();
      expect(await page.getByTestId('generate-error').textContent()).toMatch(/from 0 to 1023 .*"99999"/);
      await page.getByTestId('generate-prompt').fill('2, 105, 17, 42, 256');
      const run = page.getByTestId('run-generate');
      await run.click();
      await expect.poll(() => run.isDisabled()).toBe(true);
      await expect.poll(() => run.isEnabled(), { timeout: RUN_MS }).toBe(true);
      expect(
        await page.getByTestId('generate-error').count(),
        (await page.getByTestId('generate-error').allTextContents()).join(),
      ).toBe(0);
      const verdict = page.getByTestId('generation-verdict');
      expect(await verdict.getAttribute('data-verdict')).toBe('identical');
      expect(
        await page.getByTestId('generation-summary').textContent(),
        (await page.getByTestId('generation-summary').textContent()) ?? '',
      ).toMatch(/^MTP output is identical to classic greedy decode: 16 tokens, same SHA-256$/);
      expect(await page.getByTestId('classic-tokens').locator('.tok').count()).toBe(16);
      expect(await page.getByTestId('mtp-tokens').locator('.tok').count()).toBe(16);
      expect(await page.getByTestId('mtp-tokens').locator('.tok.first, .tok.differs, .tok.after').count()).toBe(0);
      expect(await page.getByTestId('classic-tokens').textContent()).toBe(
        await page.getByTestId('mtp-tokens').textContent(),
      );
      const counters = await page.getByTestId('mtp-counters').textContent();
      expect(counters).toMatch(
        /Rounds \(verify forwards\)\d+Drafted tokens\d+Accepted drafts\d+Acceptance rate[\d.]+%Mean accepted length[\d.]+ of 3 drafts per round/,
      );
      expect(await page.getByTestId('accepted-histogram').locator('.bar-row').count()).toBe(4);
      expect(await page.getByTestId('per-position-accepted').locator('.bar-row').count()).toBe(3);
      // The rounds table: one row per verify forward, three drafts each, the first rejected one highlighted.
      const roundsCount = Number(
        await page.getByTestId('mtp-counters').locator('[data-counter="rounds"]').textContent(),
      );
      const roundRows = page.getByTestId('mtp-rounds-table').locator('tbody tr');
      expect(await roundRows.count()).toBe(roundsCount);
      expect(await roundRows.first().locator('td').first().textContent()).toBe('0');
      expect(await roundRows.first().locator('.round-drafts .tok').count()).toBe(3);
      expect(await page.getByTestId('mtp-rounds-summary').textContent()).toMatch(
        new RegExp(`^${roundsCount} rounds?, \\d+ with a rejected draft`),
      );
      expect(await page.getByTestId('mtp-rounds-table').locator('tr[data-rejected="yes"] .tok.first').count()).toBe(
        await page.getByTestId('mtp-rounds-table').locator('tr[data-rejected="yes"]').count(),
      );
      expect(await page.getByTestId('generation-sha').textContent()).toMatch(/^Same SHA-256/);
      expect(await page.getByTestId('generation-speed').locator('td.sha').allTextContents()).toEqual([
        expect.stringMatching(/^[0-9a-f]{64}$/),
        expect.stringMatching(/^[0-9a-f]{64}$/),
      ]);
      expect(await page.getByTestId('generate-elapsed').textContent()).toMatch(/^Done in /);
      // The finished progress list reads the run's own timings: each arm's prefill and decode as the speed table
      // shows them, and "Done in" as the card's "done in" (one measurement each).
      const speedCells = await page
        .getByTestId('generation-speed')
        .locator('tbody tr')
        .evaluateAll((rows) => rows.map((r) => [...r.querySelectorAll('td')].slice(2, 4).map((c) => c.textContent)));
      expect(await runPhaseTimes(page, 'generate')).toEqual([
        ['classic prefill', speedCells[0][0]],
        ['classic decode', speedCells[0][1]],
        ['MTP prefill', speedCells[1][0]],
        ['MTP decode', speedCells[1][1]],
      ]);
      const doneIn = (await page.getByTestId('generate-elapsed').textContent())!.replace(/^Done in /, '');
      expect(await page.getByTestId('generation-setup').textContent()).toMatch(new RegExp(` · done in ${doneIn}$`));

      const [json] = await Promise.all([
        page.waitForEvent('download'),
        page.getByTestId('generation-download-json').click(),
      ]);
      expect(json.suggestedFilename()).toMatch(/^ringside-generation-identical-exact-f32-K4-hf-[0-9a-f]{12}\.json$/);
      const saved = JSON.parse(readFileSync((await json.path())!, 'utf8'));
      expect(saved.schema).toBe('ringside-generation/1');
      // who ran it and on what, as a report's provenance; the target's digest names the file
      expect(saved.provenance.app.name).toBe('ringside');
      expect(saved.provenance.adapter).toBeTypeOf('object');
      expect(json.suggestedFilename()).toContain(saved.provenance.target.digest.slice(0, 12));
      expect(saved.provenance.assistant.digest).toMatch(/^[0-9a-f]{64}$/);
      expect(saved.classic.tokens).toEqual(saved.mtp.tokens);
      expect(saved.mtp.counters.acceptedHistogram.length).toBe(4);
      expect(saved.mtp.rounds.length).toBe(roundsCount);
      expect(saved.mtp.rounds[0]).toEqual({
        at: 1,
        pos: 6,
        drafts: expect.any(Array),
        accepted: expect.any(Number),
        verify: expect.any(Array),
      });
      await screenshot(page, '16-generation-diff');
      await page.getByTestId('mtp-rounds').screenshot({ path: 'test-results/screenshots/17-generation-rounds.png' });
      expect(pageErrors(page)).toEqual([]);
    },
    TEST_MS,
  );

  it("the generation view highlights the first difference (made-up result rendered by the page's own module)", async () => {
    const p = await newPage(env.browser, env.url);
    await p.evaluate(async () => {
      // The dev server serves the page's TypeScript modules; a string keeps vitest from rewriting import().
      const load = new Function('u', 'return import(u)') as (
        u: string,
      ) => Promise<typeof import('../../src/ui/generation/generation-view.ts')>;
      const { createGenerationView } = await load('/src/ui/generation/generation-view.ts');
      const v = createGenerationView();
      document.getElementById('generation-slot')!.replaceChildren(v.root);
      const counters = {
        rounds: 6,
        drafted: 18,
        accepted: 9,
        acceptanceRate: 0.5,
        meanAcceptedLength: 1.5,
        acceptedHistogram: [2, 1, 1, 2],
        perPositionAccepted: [4, 3, 2],
      };
      const classic = [258, 17, 901, 33, 33, 7, 512, 88, 91, 4, 60, 61, 62, 63, 64, 65];
      const mtp = [258, 17, 901, 33, 33, 7, 512, 88, 92, 4, 60, 61, 70, 63, 64, 65];
      // Six rounds of K = 4 that rebuild the MTP tokens: accepted 3, 1, 0, 3, 2, 0 (the counters below).
      const rounds = [
        { at: 1, pos: 4, drafts: [17, 901, 33], accepted: 3, verify: [17, 901, 33, 33] },
        { at: 5, pos: 8, drafts: [7, 500, 1], accepted: 1, verify: [7, 512, 9, 9] },
        { at: 7, pos: 10, drafts: [91, 4, 60], accepted: 0, verify: [88, 3, 3, 3] },
        { at: 8, pos: 11, drafts: [92, 4, 60], accepted: 3, verify: [92, 4, 60, 61] },
        { at: 12, pos: 15, drafts: [70, 63, 5], accepted: 2, verify: [70, 63, 64, 2] },
        { at: 15, pos: 18, drafts: [11, 12, 13], accepted: 0, verify: [65, 1, 1, 1] },
      ];
      const g = (mode: 'classic' | 'mtp', tokens: number[], sha: string, tps: number) => ({
        mode,
        block: 4,
        prompt: [2, 105, 17],
        tokens,
        sha256: sha,
        stoppedOnEos: false,
        timings: { prefillMs: 12, decodeMs: 900, tokensPerSecond: tps },
      });
      v.show(
        {
          options: {
            prompt: 'Why is the sky blue?',
            chat: true,
            maxNew: 16,
            block: 4,
            policy: 'mlx-metal',
            precision: 'bf16' as const,
            draftPosition: 'mlxcel' as const,
          },
          result: {
            classic: g('classic', classic, 'a1'.repeat(32), 16.7),
            mtp: { ...g('mtp', mtp, 'b2'.repeat(32), 29.3), counters, rounds },
            diff: {
              prompt: [2, 105, 17],
              identical: false,
              firstDifference: 8,
              window: { start: 4, classic: classic.slice(4, 20), mtp: mtp.slice(4, 20) },
              classicSha256: 'a1'.repeat(32),
              mtpSha256: 'b2'.repeat(32),
              counters,
              tokensPerSecond: { classic: 16.7, mtp: 29.3 },
            },
            classicText: 'Rayleigh scattering makes <b>short</b> wavelengths…',
            mtpText: 'Rayleigh scattering makes <b>blue</b> light…',
          },
          createdAt: '2025-11-29T22:30:00.000Z',
          elapsedMs: 2345,
        },
        'made-up result',
      );
      document.getElementById('generation-card')!.scrollIntoView();
    });
    const verdict = p.getByTestId('generation-verdict');
    expect(await verdict.getAttribute('data-verdict')).toBe('differs');
    expect(await p.getByTestId('generation-summary').textContent()).toBe(
      'first difference at token 8: classic has token id 91, MTP has token id 92',
    );
    expect(await p.getByTestId('classic-tokens').locator('.tok.first').textContent()).toBe('91');
    expect(await p.getByTestId('mtp-tokens').locator('.tok.first').textContent()).toBe('92');
    // After the first difference: 70 differs from 62 at token 12; the rest match again and are dimmed.
    expect(await p.getByTestId('mtp-tokens').locator('.tok.differs').allTextContents()).toEqual(['70']);
    expect(await p.getByTestId('classic-tokens').locator('.tok.differs').allTextContents()).toEqual(['62']);
    expect(await p.getByTestId('mtp-tokens').locator('.tok.after').count()).toBe(6);
    expect(await p.getByTestId('generation-window').locator('td.first').allTextContents()).toEqual(['91', '92']);
    expect(await p.getByTestId('classic-text').textContent()).toBe(
      'Rayleigh scattering makes <b>short</b> wavelengths…',
    );
    expect(await p.locator('#generation-card b').count()).toBe(0);
    expect(await p.getByTestId('mtp-rounds-summary').textContent()).toBe(
      '6 rounds, 4 with a rejected draft; the first at round 1, token 6: drafted 500, the verify emitted 512.',
    );
    const rows = p.getByTestId('mtp-rounds-table').locator('tbody tr');
    expect(await rows.count()).toBe(6);
    expect(await rows.nth(1).locator('.tok.accepted').allTextContents()).toEqual(['7']);
    expect(await rows.nth(1).locator('.tok.first').allTextContents()).toEqual(['500']);
    expect(await rows.nth(1).locator('.tok.after').allTextContents()).toEqual(['1']);
    expect(await rows.nth(1).locator('.round-verify').textContent()).toBe('512 instead of 500');
    expect(await rows.nth(0).locator('.round-verify').textContent()).toBe('33 (all accepted)');
    await p.getByTestId('mtp-rounds-only-rejected').check();
    expect(await p.getByTestId('mtp-rounds-table').locator('tbody tr:visible').count()).toBe(4);
    await p.getByTestId('mtp-rounds-only-rejected').uncheck();
    expect(await p.getByTestId('generation-sha').textContent()).toMatch(/^The SHA-256 digests differ/);
    expect(await p.getByTestId('generation-prompt').textContent()).toMatch(
      /^Prompt \(3 tokens, from text in the chat template\): 2, 105, 17$/,
    );
    await p.locator('#generation-card').screenshot({ path: 'test-results/screenshots/20-generation-differs.png' });
    expect(pageErrors(p)).toEqual([]);
    await p.close();
  });
});
