/**
 * A Qwen3.5 checkpoint in the page, on the real engine in Chromium (WebGPU on SwiftShader): the qwen-tiny
 * fixture dropped on the target zone, its own policy list, the probe (exact equal; gdn-state-bf16 diverges,
 * blamed on layer 0's recurrence, with the recurrent state view in place of the ring), the trace, and
 * generation with the target's own MTP head checked against the fixture's transformers goldens. Bad folders
 * (a wrong conv kernel size, an unknown layer type, no mtp.* tensors) each get their specific message.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { newPage, pageErrors, screenshot, SCREENSHOTS, useServerAndBrowser } from './harness.ts';
import { dropFolder, fillGeneration, noJobError, runJobSettled, runProbe, TEST_MS, tokensOf } from './flows.ts';
import { writeSafetensors } from '../../src/format/safetensors-writer.ts';
import type { Dtype } from '../../src/format/dtype.ts';

const QWEN_DIR = path.resolve('test/fixtures/qwen-tiny/target');
const GOLDEN = JSON.parse(readFileSync(path.resolve('test/fixtures/qwen-tiny/golden.json'), 'utf8')) as {
  prompt: number[];
  greedy: number[];
  mtp: { tokens: number[] };
};

/** The fixture's folder with config.json edited by `edit` (text fields live in text_config). */
function withConfig(dir: string, edit: (text: Record<string, unknown>) => void): string {
  mkdirSync(dir, { recursive: true });
  const config = JSON.parse(readFileSync(path.join(QWEN_DIR, 'config.json'), 'utf8'));
  edit(config.text_config);
  writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config));
  writeFileSync(path.join(dir, 'model.safetensors'), readFileSync(path.join(QWEN_DIR, 'model.safetensors')));
  return dir;
}

/** The fixture without its mtp.* tensors, as mlx_lm.convert writes Qwen3.5 (config unchanged). */
function withoutMtp(dir: string): string {
  mkdirSync(dir, { recursive: true });
  const bytes = readFileSync(path.join(QWEN_DIR, 'model.safetensors'));
  const n = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + n).toString('utf8')) as Record<
    string,
    { dtype: Dtype; shape: number[]; data_offsets: [number, number] }
  >;
  const tensors = Object.entries(header)
    .filter(([name]) => name !== '__metadata__' && !/(^|\.)mtp\./.test(name))
    .map(([name, t]) => ({
      name,
      dtype: t.dtype,
      shape: t.shape,
      data: new Uint8Array(bytes.subarray(8 + n + t.data_offsets[0], 8 + n + t.data_offsets[1])),
    }));
  expect(tensors.length).toBeLessThan(Object.keys(header).length - 1); // some mtp.* tensors were dropped
  writeFileSync(path.join(dir, 'model.safetensors'), writeSafetensors(tensors));
  writeFileSync(path.join(dir, 'config.json'), readFileSync(path.join(QWEN_DIR, 'config.json')));
  return dir;
}

/** Generation of the goldens' prompt, 16 new tokens, K = 4, exact, with `drafts` ('mtp' or 'oracle'). */
async function runGeneration(page: Page, drafts: 'mtp' | 'oracle'): Promise<void> {
  await fillGeneration(page, GOLDEN.prompt, GOLDEN.greedy.length);
  await page.getByTestId('generate-drafts').selectOption(drafts);
  await runJobSettled(page, 'generate');
}

describe('a Qwen3.5 checkpoint in the page (qwen-tiny)', () => {
  const env = useServerAndBrowser();
  let tmp: string;
  let page: Page;
  beforeAll(async () => {
    tmp = mkdtempSync(path.join(tmpdir(), 'ringside-qwen-e2e-'));
    page = await newPage(env.browser, env.url);
  });
  afterAll(() => {
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  it('bad folders: a wrong conv kernel size and an unknown layer type each get their own message', async () => {
    const conv = withConfig(path.join(tmp, 'conv-kernel-3'), (t) => {
      t.linear_conv_kernel_dim = 3;
    });
    expect(await dropFolder(page, 'target', conv)).toBe('error');
    expect(await page.getByTestId('target-error').textContent()).toBe(
      'conv-kernel-3: model.safetensors: tensor "language_model.model.layers.0.linear_attn.conv1d.weight" has a conv kernel of 4 taps (shape [256,4,1]) but config.json says linear_conv_kernel_dim = 3 (expected [256,3,1]); the checkpoint and its config disagree',
    );
    await screenshot(page, '30-qwen-bad-conv-kernel');

    const layerType = withConfig(path.join(tmp, 'layer-type'), (t) => {
      (t.layer_types as string[])[1] = 'sliding_attention';
    });
    expect(await dropFolder(page, 'target', layerType)).toBe('error');
    expect(await page.getByTestId('target-error').textContent()).toBe(
      'layer-type: config.json: text_config.layer_types[1] is "sliding_attention", an unknown layer type (expected "linear_attention" or "full_attention")',
    );
    // The page stays usable: nothing is loaded, the runs say why they cannot start.
    expect(await page.getByTestId('run-probe').isDisabled()).toBe(true);
    expect(pageErrors(page)).toEqual([]);
  });

  it(
    'no mtp.* tensors: loads, says why the head is unavailable, runs oracle drafts and refuses head drafts',
    async () => {
      expect(await dropFolder(page, 'target', withoutMtp(path.join(tmp, 'qwen-no-mtp')))).toBe('loaded');
      expect(await page.getByTestId('target-summary').textContent()).toMatch(/MTPnone: oracle drafts only/);
      const why =
        /^qwen-no-mtp: no mtp\.\* tensors in model\.safetensors, so MTP drafting with the target's own head is unavailable/;
      expect(await page.getByTestId('target-mtp-unavailable').textContent()).toMatch(why);
      await page.getByTestId('tab-generate').click();
      expect(await page.getByTestId('generate-drafts').inputValue()).toBe('oracle');
      expect(await page.getByTestId('generate-drafts-note').textContent()).toMatch(why);
      expect(await page.getByTestId('run-generate').isEnabled()).toBe(true);

      // Asked for the head anyway: the format layer's reason, and how to run without it.
      await runGeneration(page, 'mtp');
      expect(await page.getByTestId('generate-error').textContent()).toMatch(
        /^qwen-no-mtp: no mtp\.\* tensors in model\.safetensors, .*Drop a split MTP drafter folder \(qwen3_5_mtp\) on the assistant zone, or choose oracle drafts to run MTP generation without a head\.$/,
      );
      await screenshot(page, '31-qwen-no-mtp-refused');

      await runGeneration(page, 'oracle');
      await noJobError(page, 'generate');
      expect(await page.getByTestId('generation-verdict').getAttribute('data-verdict')).toBe('identical');
      expect(await tokensOf(page, 'classic-tokens')).toEqual(GOLDEN.greedy);
      expect(await page.getByTestId('generation-drafter').textContent()).toMatch(
        /^Drafts: oracle drafts: the classic output with a fixed third of the drafts wrong \(qwen-no-mtp: no mtp\.\* tensors/,
      );
      // A third of the oracle's drafts are wrong: some rounds roll back.
      expect(await page.getByTestId('mtp-rounds-table').locator('tr[data-rejected="yes"]').count()).toBeGreaterThan(0);
      expect(pageErrors(page)).toEqual([]);
    },
    TEST_MS,
  );

  it('loads the fixture: family facts in the summary, the Qwen3.5 policies in the menus', async () => {
    expect(await dropFolder(page, 'target', QWEN_DIR)).toBe('loaded');
    const t = await page.getByTestId('target-summary').textContent();
    expect(t).toMatch(/Typeqwen3_5/);
    expect(t).toMatch(/MTPown head \(mtp\.\*, 1 layer\)/);
    expect(t).toMatch(/Layers6: 4 Gated DeltaNet \(linear\), 2 full attention/);
    expect(t).toMatch(/Windownone \(recurrent state \+ full KV cache\)/);
    expect(t).toMatch(/affine 4-bit g64/);
    expect(await page.getByTestId('target-mtp-unavailable').count()).toBe(0);
    const policies = page.getByTestId('policy').locator('option');
    await expect.poll(() => policies.allTextContents()).toContain('gdn-state-bf16');
    const names = await policies.allTextContents();
    expect(names).toEqual(expect.arrayContaining(['exact', 'matmul-m-split', 'attention-m-split', 'gdn-state-bf16']));
    // Gemma's sliding-ring and MLX policies do not apply to a model without a ring or MLX's gated-delta kernel.
    expect(names).not.toContain('ring-chronological');
    expect(names.some((n) => n.startsWith('mlx-'))).toBe(false);
    // Generation needs no assistant: the target drafts with its own head.
    expect(await page.getByTestId('run-generate').isEnabled()).toBe(true);
    await screenshot(page, '32-qwen-loaded');
    expect(pageErrors(page)).toEqual([]);
  });

  it(
    'probe, exact: every draw equal; the long draw shows the recurrent state, equal, instead of a ring',
    async () => {
      expect(await runProbe(page, 'exact')).toBe('equal');
      expect(await page.getByTestId('summary').textContent()).toMatch(/^block-versus-chain probe passed: 4 draws/);
      expect(await page.getByTestId('consequence').textContent()).toBe('MTP would be enabled');
      expect(await page.getByTestId('draws').locator('li.equal').count()).toBe(4);
      expect(await page.getByTestId('ring-title').textContent()).toBe('Recurrent state of the long draw');
      expect(await page.getByTestId('ring-view').isVisible()).toBe(false);
      expect(await page.getByTestId('state-table').locator('tbody tr').count()).toBe(4); // layers 0, 1, 3, 4
      expect(await page.getByTestId('state-table').locator('td.state-cell.eq').count()).toBe(16);
      expect(await page.getByTestId('state-caption').textContent()).toMatch(
        /^draw 3 \(prompt 96 tokens\): Each Gated DeltaNet layer carries a recurrent state S \(4 × 32 × 32 f32\) .*Full-attention layers \(2, 5\) keep a linear KV cache.*All 16 states are equal in every byte\.$/,
      );
      await screenshot(page, '33-qwen-probe-exact');
      expect(pageErrors(page)).toEqual([]);
    },
    TEST_MS,
  );

  it(
    'probe, gdn-state-bf16: diverges, blamed on layer 0 recurrence; heatmap and state view show where',
    async () => {
      expect(await runProbe(page, 'gdn-state-bf16')).toBe('diverges');
      expect(await page.getByTestId('summary').textContent()).toMatch(
        /^block-versus-chain probe failed: 4 of 4 draws differ/,
      );
      expect(await page.getByTestId('first-divergence').textContent()).toBe(
        'first divergence: layer 0 (linear) recurrence (o = S q) at position 1',
      );
      expect(await page.getByTestId('consequence').textContent()).toMatch(/^MTP would be declined/);
      expect(await page.getByTestId('heatmap').isVisible()).toBe(true);
      expect(await page.getByTestId('heatmap-readout').textContent()).toMatch(
        /^layer 0 \(linear\) · recurrence \(o = S q\) at position 1: .* first divergence$/,
      );
      // Both arms store S rounded after token 0 (equal); from token 1 on the block's grew from f32.
      const rows = page.getByTestId('state-table').locator('tbody tr');
      for (let i = 0; i < 4; i++)
        expect(
          await rows
            .nth(i)
            .locator('td.state-cell')
            .evaluateAll((tds) => tds.map((td) => td.classList.contains('ne'))),
        ).toEqual([false, true, true, true]);
      expect(await page.getByTestId('state-caption').textContent()).toMatch(
        /12 of 16 states differ; the first is layer 0 after block token 1 \(position 97\)\.$/,
      );
      expect(await page.getByTestId('lengths-hint').textContent()).toMatch(/^Empty draw lengths run 8, 8, 8, 96: /);
      expect(await page.getByTestId('provenance').textContent()).toMatch(
        /qwen3_5 · target · 6 layers.* no sliding window,/,
      );
      await screenshot(page, '34-qwen-probe-gdn-state-bf16');
      await page.getByTestId('heatmap').screenshot({ path: path.join(SCREENSHOTS, '35-qwen-heatmap.png') });
      await page.getByTestId('state-view').screenshot({ path: path.join(SCREENSHOTS, '36-qwen-state-view.png') });

      // The share link carries the state view: a fresh page without a model shows the same table and words.
      await page.getByTestId('copy-link').click();
      const field = page.getByTestId('share-link');
      await expect.poll(() => field.inputValue()).toMatch(/#report=[A-Za-z0-9_-]+$/);
      const fresh = await newPage(env.browser, await field.inputValue());
      await expect
        .poll(() => fresh.getByTestId('verdict').getAttribute('data-verdict'), { timeout: 30_000 })
        .toBe('diverges');
      expect(await fresh.getByTestId('state-caption').textContent()).toBe(
        await page.getByTestId('state-caption').textContent(),
      );
      expect(await fresh.getByTestId('ring-title').textContent()).toBe('Recurrent state of the long draw');
      expect(pageErrors(fresh)).toEqual([]);
      await fresh.close();
      expect(pageErrors(page)).toEqual([]);
    },
    TEST_MS,
  );

  it(
    'trace: window-less defaults; exact keeps every row; gdn-state-bf16 parts the rows',
    async () => {
      await page.getByTestId('tab-trace').click();
      expect(await page.getByTestId('trace-prefix').inputValue()).toBe('1536');
      expect(await page.getByTestId('trace-hint').textContent()).toMatch(/Qwen3\.5 target has no sliding window/);
      // The documented small run (docs/QWEN35.md section 7): prefix 20, 32 traced, K = 4.
      await page.getByTestId('trace-prefix').fill('20');
      await page.getByTestId('trace-traced').fill('32');
      for (const [policy, verdict] of [
        ['exact', 'equal'],
        ['gdn-state-bf16', 'diverges'],
      ] as const) {
        await page.getByTestId('trace-policy').selectOption(policy);
        await runJobSettled(page, 'trace');
        await noJobError(page, 'trace');
        expect(await page.getByTestId('trace-verdict').getAttribute('data-verdict')).toBe(verdict);
        expect(await page.getByTestId('trace-provenance').textContent()).toContain(`Policy${policy}`);
      }
      expect(await page.getByTestId('trace-summary').textContent()).toMatch(
        /^teacher-forced trace: \d+ of 32 rows differ; \d+ top-1 disagreements/,
      );
      await screenshot(page, '37-qwen-trace-gdn-state-bf16');
      expect(pageErrors(page)).toEqual([]);
    },
    TEST_MS,
  );

  it(
    "generation with the target's own MTP head: the goldens' tokens and first drafts, identical to classic",
    async () => {
      await page.getByTestId('tab-generate').click();
      expect(await page.getByTestId('generate-drafts').inputValue()).toBe('mtp');
      expect(await page.getByTestId('generate-drafts-note').isVisible()).toBe(false);
      await runGeneration(page, 'mtp');
      await noJobError(page, 'generate');
      expect(await page.getByTestId('generation-verdict').getAttribute('data-verdict')).toBe('identical');
      expect(await page.getByTestId('generation-summary').textContent()).toBe(
        'MTP output is identical to classic greedy decode: 16 tokens, same SHA-256',
      );
      // transformers' float64 greedy decode, and the head's float64 drafts of round 0 (vLLM's structure).
      expect(await tokensOf(page, 'classic-tokens')).toEqual(GOLDEN.greedy);
      expect(await tokensOf(page, 'mtp-tokens')).toEqual(GOLDEN.greedy);
      const round0 = page.getByTestId('mtp-rounds-table').locator('tbody tr').first();
      expect((await round0.locator('.round-drafts .tok').allTextContents()).map(Number)).toEqual(GOLDEN.mtp.tokens);
      expect(await page.getByTestId('generation-drafter').textContent()).toBe(
        "Drafts: the target's own MTP head (mtp.* of target)",
      );
      expect(await page.getByTestId('generation-setup').textContent()).not.toMatch(/draft position/);
      await screenshot(page, '38-qwen-generation-mtp-head');
      expect(pageErrors(page)).toEqual([]);
    },
    TEST_MS,
  );
});
