/**
 * Refusals of the format layer named only the file ("missing tensor ... in
 * model.safetensors", "config.json: ..."), so with a target and an assistant (or drafter) dropped together the user
 * could not tell which folder was wrong. Every opener (Gemma 4, Qwen3.5 target, Qwen3.5 split drafter) now puts
 * the checkpoint's label first, once: "<label>: <message>". The page passes the dropped folder's name as the label;
 * the command line the folder's name, which its namingFolder then replaces with the path as typed.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { bytesSource } from '../../src/format/bytesource.ts';
import { openCheckpoint } from '../../src/format/checkpoint.ts';
import { FormatError, namingCheckpoint } from '../../src/format/errors.ts';
import { openFamilyCheckpoint } from '../../src/format/open-target.ts';
import { openQwen35Checkpoint, openQwen35Drafter } from '../../src/format/qwen3_5/index.ts';
import { nodeFolderSources } from '../../src/node/file-source.ts';
import { qwenSynthFiles, QWEN_SYNTH } from '../support/qwen-synth.ts';
import { formatError, refusal } from '../support/refusal.ts';
import { fixtureFiles, memoryCheckpoint } from './fixtures.ts';

describe('format refusals name the checkpoint', () => {
  it('Gemma 4: a missing tensor, a bad config value and a bad header all start with the label', async () => {
    const { config, tensors } = await fixtureFiles('assistant');
    const noPre = memoryCheckpoint(
      config,
      tensors.filter((t) => t.name !== 'pre_projection.weight'),
    );
    expect(await refusal(openCheckpoint(noPre, 'my-assistant'))).toBe(
      'my-assistant: missing tensor "pre_projection.weight" (packed U32 weight; "pre_projection.scales" exists) in model.safetensors',
    );
    const e = await formatError(openCheckpoint(noPre, 'my-assistant'));
    // file and subject are kept for the UI
    expect(e.subject).toBe('pre_projection.weight');
    const badEps = memoryCheckpoint({ ...config, text_config: { ...config.text_config, rms_norm_eps: -1 } }, tensors);
    expect(await refusal(openCheckpoint(badEps, 'my-assistant'))).toBe(
      'my-assistant: config.json: text_config.rms_norm_eps must be a positive number, found -1',
    );
    expect(await refusal(openCheckpoint([badEps[0], bytesSource('model.safetensors', new Uint8Array(5))], 'x'))).toBe(
      'x: model.safetensors: file is 5 bytes, too short for the 8-byte safetensors header length',
    );
  });

  it('messages that already name the checkpoint are not named twice', async () => {
    expect(await refusal(openCheckpoint([bytesSource('model.safetensors', new Uint8Array(8))], 'my-model'))).toBe(
      'my-model: no config.json among the 1 files given (model.safetensors)',
    );
    await expect(
      namingCheckpoint('t', async () => {
        throw new FormatError('t: already named', 'config.json', 'k');
      }),
    ).rejects.toThrow(/^t: already named$/);
    // other errors pass through untouched
    await expect(
      namingCheckpoint('t', async () => {
        throw new Error('not a format problem');
      }),
    ).rejects.toThrow(/^not a format problem$/);
  });

  it('Qwen3.5 target and split drafter openers name their folder', async () => {
    const noALog = qwenSynthFiles(QWEN_SYNTH, {
      editTensors: (t) => t.delete('language_model.model.layers.0.linear_attn.A_log'),
    });
    expect(await refusal(openQwen35Checkpoint(noALog, 'qwen-x'))).toBe(
      'qwen-x: missing tensor "layers.0.linear_attn.A_log" (A_log of shape [4]) in model.safetensors',
    );
    const target = await nodeFolderSources(path.resolve('test/fixtures/qwen-tiny/target'));
    const json = new TextEncoder().encode(
      JSON.stringify({ model_type: 'qwen3_5_mtp', text_config: { vocab_size: -1 } }),
    );
    const weights = target.filter((f) => f.name.endsWith('.safetensors'));
    expect(await refusal(openQwen35Drafter([bytesSource('config.json', json), ...weights], 'my-mtp'))).toMatch(
      /^my-mtp: config\.json: text_config\.\w+ must be a positive integer/,
    );
  });

  it('the page and the CLI open through openFamilyCheckpoint with the folder name', async () => {
    const { config, tensors } = await fixtureFiles('target');
    const files = memoryCheckpoint({ ...config, eos_token_id: 'x' }, tensors);
    expect(await refusal(openFamilyCheckpoint(files, 'dropped-folder'))).toMatch(
      /^dropped-folder: config\.json: eos_token_id must be a token id/,
    );
  });
});
