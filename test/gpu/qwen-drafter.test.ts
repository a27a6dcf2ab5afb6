import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testGpu } from './gpu-context.ts';
import { loadGolden, type Golden } from '../support/fixtures.ts';
import { splitQwenDrafter, writeFolder } from '../support/qwen-drafter-folder.ts';
import { qwenSynthTensors, qwenSynthConfig, QWEN_SYNTH, safetensorsBytes } from '../support/qwen-synth.ts';
import {
  attachQwen35Drafter,
  openQwen35Checkpoint,
  openQwen35Drafter,
  type Qwen35Description,
} from '../../src/format/qwen3_5/index.ts';
import { nodeFolderSources } from '../../src/node/file-source.ts';
import { uploadQwenWeights } from '../../src/model/qwen3_5/weights.ts';
import { QwenTargetModel } from '../../src/model/qwen3_5/target.ts';
import { QwenMtpHead, qwenHeadSource } from '../../src/model/qwen3_5/mtp.ts';
import { generateClassic, generateMtp, type GenerateResult } from '../../src/model/generate.ts';
import type { GpuContext } from '../../src/gpu/device.ts';

/**
 * A split MTP drafter folder (mlx-vlm's qwen3_5_mtp layout, written here from qwen-tiny's own mtp.* tensors)
 * drafts exactly as the in-checkpoint head: the same drafts every round, the same tokens and SHA-256, equal to
 * classic greedy; on the command line `--draft` wins over the target's own head and says so, and a drafter of
 * another hidden size is refused with the file, the tensor and the shapes.
 */
const FIXTURE = path.resolve(process.cwd(), 'test/fixtures/qwen-tiny');
const run = promisify(execFile);
const cli = (...args: string[]) => run('npm', ['run', '-s', 'cli', '--', ...args], { timeout: 240_000 });

describe('split Qwen3.5 MTP drafter on the GPU (qwen-tiny)', () => {
  let ctx: GpuContext;
  let golden: Golden;
  let dir: string;
  let drafterDir: string;
  let bareDir: string;
  beforeAll(async () => {
    ctx = await testGpu();
    golden = await loadGolden(FIXTURE);
    dir = mkdtempSync(path.join(tmpdir(), 'ringside-qdrafter-'));
    const { drafter, bareTarget } = await splitQwenDrafter(await nodeFolderSources(path.join(FIXTURE, 'target')));
    drafterDir = writeFolder(path.join(dir, 'qwen-tiny-MTP'), drafter);
    bareDir = writeFolder(path.join(dir, 'qwen-tiny-bare'), bareTarget);
  });
  afterAll(() => ctx?.destroy());

  /** Generates with the description's MTP head (and classic greedy) on a fresh model. */
  async function generate(
    d: Qwen35Description,
    maxNew: number,
  ): Promise<{ mtp: GenerateResult; classic: GenerateResult }> {
    const weights = await uploadQwenWeights(ctx.device, d);
    const target = new QwenTargetModel(ctx, weights, {
      maxContext: golden.json.prompt.length + maxNew + 8,
      maxBlock: 4,
      prefillChunk: 32,
      precision: 'f32',
    });
    const head = new QwenMtpHead(target);
    try {
      const classic = await generateClassic(target, golden.json.prompt, { maxNew });
      const mtp = await generateMtp(target, qwenHeadSource(head, 4), golden.json.prompt, 4, { maxNew });
      return { mtp, classic };
    } finally {
      head.destroy();
      target.destroy();
      weights.destroy();
    }
  }

  it('drafts the same tokens every round as the in-checkpoint head; same SHA-256, equal to classic', async () => {
    const maxNew = 120;
    const own = await openQwen35Checkpoint(await nodeFolderSources(path.join(FIXTURE, 'target')), 'qwen-tiny');
    const bare = await openQwen35Checkpoint(await nodeFolderSources(bareDir), 'qwen-tiny-bare');
    expect(bare.description.mtp).toBeNull();
    const dr = await openQwen35Drafter(await nodeFolderSources(drafterDir), 'qwen-tiny-MTP');
    const withDrafter = attachQwen35Drafter(bare.description, bare.label, dr);
    expect(withDrafter.mtp!.source).toBe('drafter');

    const a = await generate(own.description, maxNew);
    const b = await generate(withDrafter, maxNew);
    const drafts = (r: GenerateResult) => r.rounds!.map((x) => x.drafts);
    console.log(
      `qwen-tiny split drafter: ${b.mtp.rounds!.length} rounds, accepted ${b.mtp.counters!.accepted} of ${b.mtp.counters!.drafted} drafts (own head: ${a.mtp.counters!.accepted} of ${a.mtp.counters!.drafted}), first drafts ${b.mtp.rounds![0].drafts.join(',')}; sha256 ${b.mtp.sha256.slice(0, 16)}`,
    );
    // round 0 drafts from the prompt: the fixture's float64 head drafts (qwen-tiny's random head is rarely
    // right, so rounds mostly reject; the drafts are compared token for token all the same)
    const golden0 = [...(await golden.tensor('mtp.draft.tokens')).data].slice(0, 3);
    expect(b.mtp.rounds![0].drafts).toEqual(golden0);
    expect(drafts(b.mtp)).toEqual(drafts(a.mtp));
    expect(b.mtp.tokens).toEqual(a.mtp.tokens);
    expect(b.mtp.sha256).toBe(a.mtp.sha256);
    expect(b.mtp.sha256).toBe(a.classic.sha256);
    expect(b.classic.sha256).toBe(a.classic.sha256);
    expect(a.classic.tokens.slice(0, golden.json.greedy.length)).toEqual(golden.json.greedy);
  });

  it('command line: --draft wins over the own head and says so; the same output; a wider drafter is refused', async () => {
    const n = golden.json.greedy.length;
    const base = ['--tokens', golden.json.prompt.join(','), '--max-new', `${n}`, '--mode', 'mtp', '--block', '4'];
    const own = await cli(
      'generate',
      '--target',
      path.join(FIXTURE, 'target'),
      ...base,
      '--json',
      path.join(dir, 'own.json'),
    );
    expect(own.stdout).toMatch(/^MTP head: target's own mtp\.\* head drafts$/m);
    const split = await cli(
      'generate',
      '--target',
      path.join(FIXTURE, 'target'),
      '--draft',
      drafterDir,
      ...base,
      '--json',
      path.join(dir, 'split.json'),
    );
    expect(split.stdout).toMatch(
      /^MTP head: the split MTP drafter qwen-tiny-MTP drafts \(given as --draft, it replaces target's own mtp\.\* head\)$/m,
    );
    const [r1, r2] = ['own', 'split'].map((f) => JSON.parse(readFileSync(path.join(dir, `${f}.json`), 'utf8')));
    expect(r2.mtpHead).toMatch(/^the split MTP drafter qwen-tiny-MTP drafts/);
    expect(r2.tokens).toEqual(golden.json.greedy);
    expect(r2.sha256).toBe(r1.sha256);
    expect(r2.rounds.map((r: { drafts: number[] }) => r.drafts)).toEqual(
      r1.rounds.map((r: { drafts: number[] }) => r.drafts),
    );

    // the probe checks the drafter against the target and records it where a Gemma assistant goes
    const probe = await cli('probe', '--target', bareDir, '--draft', drafterDir, '--report', path.join(dir, 'p.json'));
    expect(probe.stdout).toMatch(/probe passed/);
    const prov = JSON.parse(readFileSync(path.join(dir, 'p.json'), 'utf8')).provenance;
    expect(prov.assistant).toMatchObject({ label: 'qwen-tiny-MTP', modelType: 'qwen3_5_mtp', hidden: 128 });
    expect(prov.assistant.quantization).toBe('affine 4-bit g64');

    // a drafter split from a model of hidden size 32 (qwen-synth's geometry) against qwen-tiny (hidden 128)
    const g = QWEN_SYNTH;
    const head = new Map(
      [...qwenSynthTensors(g, 5, true)].filter(([k]) => k.startsWith('mtp.')).map(([k, v]) => [k.slice(4), v]),
    );
    const wide = writeFolder(
      path.join(dir, 'other-MTP'),
      new Map([
        [
          'config.json',
          new TextEncoder().encode(
            JSON.stringify({
              model_type: 'qwen3_5_mtp',
              text_config: (qwenSynthConfig(g) as { text_config: object }).text_config,
            }),
          ),
        ],
        ['model.safetensors', safetensorsBytes(head)],
      ]),
    );
    const bad = await cli(
      'generate',
      '--target',
      bareDir,
      '--draft',
      wide,
      ...base,
      '--json',
      path.join(dir, 'x.json'),
    ).catch((e) => e);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain(
      'other-MTP: the split MTP drafter does not fit target qwen-tiny-bare: model.safetensors: tensor "pre_fc_norm_embedding.weight" has shape [32], expected [128] (MTP embedding norm weight)',
    );
  });
});
