/**
 * A split Qwen3.5 MTP drafter folder (mlx-vlm's qwen3_5_mtp layout, split here from qwen-tiny's own mtp.* tensors by
 * test/support/qwen-drafter-folder.ts) on the page's assistant zone, on the real engine in Chromium (SwiftShader):
 * dropped before its target it waits and attaches when a Qwen3.5 target loads; generation then drafts with its head
 * (the goldens' tokens and round-0 drafts, identical to classic) and says which head drafts; beside a target with its
 * own head it replaces that head; the probe records it in the provenance. A drafter that does not fit gets
 * attachQwen35Drafter's message (dropped on the zone, or when its target loads), and folders on the wrong zone or
 * beside a Gemma 4 target are refused with where they go.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { newPage, pageErrors, screenshot, useServerAndBrowser } from './harness.ts';
import { dropFolder, runJob, TARGET_DIR as GEMMA_TARGET, TEST_MS } from './flows.ts';
import { splitQwenDrafter, writeFolder } from '../support/qwen-drafter-folder.ts';
import { QWEN_SYNTH, qwenSynthConfig, qwenSynthTensors, safetensorsBytes } from '../support/qwen-synth.ts';
import { nodeFolderSources } from '../../src/node/file-source.ts';

const QWEN_DIR = path.resolve('test/fixtures/qwen-tiny/target');
const GOLDEN = JSON.parse(readFileSync(path.resolve('test/fixtures/qwen-tiny/golden.json'), 'utf8')) as {
  prompt: number[];
  greedy: number[];
  mtp: { tokens: number[] };
};

/** The message attachQwen35Drafter gives for a head of hidden size 32 (qwen-synth's) against qwen-tiny's 128. */
const MISFIT = (target: string) =>
  new RegExp(
    `^other-MTP: the split MTP drafter does not fit target ${target}: model\\.safetensors: tensor "pre_fc_norm_embedding\\.weight" has shape \\[32\\], expected \\[128\\] \\(MTP embedding norm weight\\); and config\\.json: text_config\\.hidden_size is 32, expected 128`,
  );

/** Generation of the goldens' prompt, 16 new tokens, K = 4, exact, drafted by the MTP head. */
async function generateWithHead(page: Page): Promise<void> {
  await page.getByTestId('tab-generate').click();
  expect(await page.getByTestId('generate-drafts').inputValue()).toBe('mtp');
  expect(await page.getByTestId('generate-drafts-head').textContent()).toBe('split MTP drafter qwen-tiny-MTP');
  await page.getByTestId('generate-prompt').fill(GOLDEN.prompt.join(', '));
  await page.getByTestId('generate-max-new').fill(String(GOLDEN.greedy.length));
  await page.getByTestId('generate-block').selectOption('4');
  await page.getByTestId('generate-policy').selectOption('exact');
  await runJob(page, 'generate');
  expect(await page.getByTestId('generation-verdict').getAttribute('data-verdict')).toBe('identical');
  const tokens = async (id: string) => (await page.getByTestId(id).locator('.tok').allTextContents()).map(Number);
  expect(await tokens('classic-tokens')).toEqual(GOLDEN.greedy);
  expect(await tokens('mtp-tokens')).toEqual(GOLDEN.greedy);
  // The split head drafts what the in-checkpoint head drafts: the fixture's float64 drafts of round 0.
  const round0 = page.getByTestId('mtp-rounds-table').locator('tbody tr').first();
  expect((await round0.locator('.round-drafts .tok').allTextContents()).map(Number)).toEqual(GOLDEN.mtp.tokens);
  expect(await page.getByTestId('mtp-arm').locator('h3').textContent()).toBe('MTP (K = 4, split MTP drafter)');
}

describe('a split Qwen3.5 MTP drafter folder on the assistant zone (qwen-tiny)', () => {
  const env = useServerAndBrowser();
  let tmp = '';
  let drafterDir: string;
  let bareDir: string;
  let misfitDir: string;
  let page: Page;
  beforeAll(async () => {
    tmp = mkdtempSync(path.join(tmpdir(), 'ringside-qdrafter-e2e-'));
    const { drafter, bareTarget } = await splitQwenDrafter(await nodeFolderSources(QWEN_DIR));
    drafterDir = writeFolder(path.join(tmp, 'qwen-tiny-MTP'), drafter);
    bareDir = writeFolder(path.join(tmp, 'qwen-tiny-bare'), bareTarget);
    // A head split from a model of hidden size 32 (qwen-synth's geometry), which cannot read qwen-tiny's hidden 128.
    const head = new Map(
      [...qwenSynthTensors(QWEN_SYNTH, 5, true)].filter(([k]) => k.startsWith('mtp.')).map(([k, v]) => [k.slice(4), v]),
    );
    const config = {
      model_type: 'qwen3_5_mtp',
      text_config: (qwenSynthConfig(QWEN_SYNTH) as { text_config: object }).text_config,
    };
    misfitDir = writeFolder(
      path.join(tmp, 'other-MTP'),
      new Map([
        ['config.json', new TextEncoder().encode(JSON.stringify(config))],
        ['model.safetensors', safetensorsBytes(head)],
      ]),
    );
    page = await newPage(env.browser, env.url);
  });
  afterAll(() => {
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  it('dropped before its target, the drafter waits; it attaches when a Qwen3.5 target without mtp.* loads', async () => {
    expect(await dropFolder(page, 'assistant', drafterDir)).toBe('loaded');
    const waiting = await page.getByTestId('assistant-summary').textContent();
    expect(waiting).toMatch(/^Typeqwen3_5_mtpDraftswaiting for a Qwen3\.5 target: drop one on the target zone/);
    expect(waiting).toMatch(/Layers1 \(fc, then one full-attention layer\)Hidden128/);
    await screenshot(page, '60-qwen-drafter-waiting');

    expect(await dropFolder(page, 'target', bareDir)).toBe('loaded');
    expect(await page.getByTestId('target-summary').textContent()).toMatch(
      /MTPsplit drafter qwen-tiny-MTP \(qwen3_5_mtp\)Layers/,
    );
    // The target has no mtp.* tensors, but the drafter drafts for it: no "unavailable" note.
    expect(await page.getByTestId('target-mtp-unavailable').count()).toBe(0);
    expect(await page.getByTestId('assistant-zone').getAttribute('data-state')).toBe('loaded');
    expect(await page.getByTestId('assistant-summary').textContent()).toMatch(
      /Draftsfor qwen-tiny-bare \(it has no mtp\.\* head of its own\)/,
    );
    expect(await page.getByTestId('assistant-summary').textContent()).toMatch(/Quantizationaffine 4-bit g64/);
    await screenshot(page, '61-qwen-drafter-attached');
    expect(pageErrors(page)).toEqual([]);
  });

  it(
    "generation drafts with the drafter's head: the goldens, identical to classic; the probe records it",
    async () => {
      await generateWithHead(page);
      expect(await page.getByTestId('generation-drafter').textContent()).toBe(
        'Drafts: the split MTP drafter qwen-tiny-MTP (qwen3_5_mtp), for qwen-tiny-bare, which has no mtp.* head of its own',
      );
      await screenshot(page, '62-qwen-drafter-generation');

      await page.getByTestId('tab-probe').click();
      await page.getByTestId('policy').selectOption('exact');
      await runJob(page, 'probe');
      expect(await page.getByTestId('verdict').getAttribute('data-verdict')).toBe('equal');
      expect(await page.getByTestId('provenance').textContent()).toMatch(
        /Assistantqwen3_5_mtp · qwen-tiny-MTP · 1 layers, hidden 128, .* affine 4-bit g64/,
      );
      expect(pageErrors(page)).toEqual([]);
    },
    TEST_MS,
  );

  it(
    'beside a target with its own mtp.* head, the drafter replaces it',
    async () => {
      expect(await dropFolder(page, 'target', QWEN_DIR)).toBe('loaded');
      expect(await page.getByTestId('target-summary').textContent()).toMatch(
        /MTPsplit drafter qwen-tiny-MTP \(qwen3_5_mtp, replaces the own mtp\.\* head\)/,
      );
      expect(await page.getByTestId('assistant-summary').textContent()).toMatch(
        /Draftsfor target, in place of its own mtp\.\* head/,
      );
      await generateWithHead(page);
      expect(await page.getByTestId('generation-drafter').textContent()).toBe(
        "Drafts: the split MTP drafter qwen-tiny-MTP (qwen3_5_mtp), in place of target's own mtp.* head",
      );
      expect(pageErrors(page)).toEqual([]);
    },
    TEST_MS,
  );

  it("a drafter that does not fit the target is refused with attachQwen35Drafter's message", async () => {
    expect(await dropFolder(page, 'assistant', misfitDir)).toBe('error');
    expect(await page.getByTestId('assistant-error').textContent()).toMatch(MISFIT('target'));
    // Refused before anything was replaced: the attached drafter stays, and still drafts.
    expect(await page.getByTestId('assistant-summary').textContent()).toMatch(/^Typeqwen3_5_mtpDraftsfor target/);
    await screenshot(page, '63-qwen-drafter-misfit');
    expect(pageErrors(page)).toEqual([]);
  });

  it('a waiting drafter that does not fit the target that loads is dropped with the same message', async () => {
    const fresh = await newPage(env.browser, env.url);
    expect(await dropFolder(fresh, 'assistant', misfitDir)).toBe('loaded');
    expect(await dropFolder(fresh, 'target', bareDir)).toBe('loaded');
    expect(await fresh.getByTestId('assistant-zone').getAttribute('data-state')).toBe('error');
    expect(await fresh.getByTestId('assistant-error').textContent()).toMatch(MISFIT('qwen-tiny-bare'));
    expect(await fresh.getByTestId('assistant-summary').count()).toBe(0);
    // Without a head, generation falls back on oracle drafts, saying why.
    expect(await fresh.getByTestId('target-summary').textContent()).toMatch(/MTPnone: oracle drafts only/);
    await screenshot(fresh, '64-qwen-drafter-dropped');
    expect(pageErrors(fresh)).toEqual([]);
    await fresh.close();
  });

  it('folders on the wrong zone, and a drafter beside a Gemma 4 target, are refused with where they go', async () => {
    const fresh = await newPage(env.browser, env.url);
    expect(await dropFolder(fresh, 'target', drafterDir)).toBe('error');
    expect(await fresh.getByTestId('target-error').textContent()).toBe(
      `qwen-tiny-MTP: a split Qwen3.5 MTP drafter (model_type "qwen3_5_mtp") on the target zone. Drop it on the MTP assistant zone: it drafts for the Qwen3.5 target loaded here, in place of the target's own mtp.* head.`,
    );
    expect(await dropFolder(fresh, 'assistant', QWEN_DIR)).toBe('error');
    expect(await fresh.getByTestId('assistant-error').textContent()).toMatch(
      /^target: a Qwen3\.5 target \(model_type "qwen3_5"\) on the MTP assistant zone\. Drop it on the target zone/,
    );
    expect(await dropFolder(fresh, 'target', GEMMA_TARGET)).toBe('loaded');
    expect(await dropFolder(fresh, 'assistant', drafterDir)).toBe('error');
    expect(await fresh.getByTestId('assistant-error').textContent()).toMatch(
      /^qwen-tiny-MTP: a split Qwen3\.5 MTP drafter \(model_type "qwen3_5_mtp"\) cannot draft for the loaded Gemma 4 target target; load a Qwen3\.5 target first/,
    );
    await screenshot(fresh, '65-qwen-drafter-wrong-zones');
    expect(pageErrors(fresh)).toEqual([]);
    await fresh.close();
  });
});
