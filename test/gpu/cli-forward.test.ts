import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { TINY_A, TINY_A_F64, loadGolden, loadTransformersF32, maxAbsDiff } from '../support/fixtures.ts';
import { readSafetensorsHeader, readTensorBytes } from '../../src/format/safetensors.ts';
import { nodeFileSource } from '../../src/node/file-source.ts';

const run = promisify(execFile);

async function readOut(file: string): Promise<Map<string, Uint8Array>> {
  const h = await readSafetensorsHeader(await nodeFileSource(file));
  const out = new Map<string, Uint8Array>();
  for (const t of h.tensors) out.set(t.name, await readTensorBytes(t));
  return out;
}

describe('npm run cli -- forward', () => {
  it('writes fixture-named logits and activations; chain and block 3 files are byte-identical', async () => {
    const golden = await loadGolden();
    const dir = mkdtempSync(path.join(tmpdir(), 'ringside-fwd-'));
    const tokens = golden.json.prompt.join(',');
    const files: Record<string, string> = {};
    for (const [name, extra] of [
      ['whole', []],
      ['chain', ['--chain']],
      ['block3', ['--block', '3']],
    ] as const) {
      files[name] = path.join(dir, `${name}.safetensors`);
      await run(
        'npm',
        [
          'run',
          '-s',
          'cli',
          '--',
          'forward',
          '--model',
          path.join(TINY_A, 'target'),
          '--tokens',
          tokens,
          '--out',
          files[name],
          '--activations',
          ...extra,
        ],
        { timeout: 120_000 },
      );
    }
    const whole = await readOut(files.whole);
    const chain = await readOut(files.chain);
    const block = await readOut(files.block3);
    expect([...whole.keys()].sort()).toEqual(golden.names.filter((n) => n === 'logits' || /^act\./.test(n)).sort());
    const logits = new Float32Array(whole.get('logits')!.buffer);
    // The bound of test/gpu/target-golden.test.ts: transformers' own f32 run's distance to the float64
    // goldens (the yardstick the engine meets), plus the shared F32 goldens' own distance to them.
    const shared = (await golden.tensor('logits')).data;
    const truth = (await (await loadGolden(TINY_A_F64)).tensor('logits')).data;
    const bound =
      maxAbsDiff((await (await loadTransformersF32()).tensor('logits')).data, truth) + maxAbsDiff(shared, truth);
    expect(
      maxAbsDiff(logits, shared),
      `logits max abs vs the shared goldens (bound ${bound.toExponential(2)})`,
    ).toBeLessThanOrEqual(bound);
    for (const name of chain.keys()) expect(Buffer.compare(chain.get(name)!, block.get(name)!), name).toBe(0);
    expect(readFileSync(files.chain).length).toBeGreaterThan(40 * 1024 * 4);
  });

  it('rejects a token outside the vocabulary with a clear message', async () => {
    const err = await run(
      'npm',
      [
        'run',
        '-s',
        'cli',
        '--',
        'forward',
        '--model',
        path.join(TINY_A, 'target'),
        '--tokens',
        '1,5000',
        '--out',
        '/tmp/x.safetensors',
      ],
      { timeout: 60_000 },
    ).catch((e) => e);
    expect(err.code).toBe(1);
    expect(err.stderr).toMatch(/token 5000 is outside the vocabulary \(1024\)/);
  });
});
