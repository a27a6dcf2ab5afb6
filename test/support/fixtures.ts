/** Access to the test fixtures (test/fixtures): checkpoints and golden tensors. */
import path from 'node:path';
import { readFileSync } from 'node:fs';
import { nodeFileSource, openCheckpointDir } from '../../src/node/file-source.ts';
import { readSafetensorsHeader, readTensorBytes } from '../../src/format/safetensors.ts';
import { toFloat64 } from '../../src/format/dtype.ts';
import type { Checkpoint } from '../../src/format/checkpoint.ts';

export const FIXTURES = path.resolve(process.cwd(), 'test/fixtures');
export const TINY_A = path.join(FIXTURES, 'tiny-a');
/**
 * The same model's goldens computed in float64 throughout and stored as F64 (tools/make_f64_goldens.py; see
 * its README): the yardstick for the float64 reference (1e-9) and for the GPU's NMSE bounds.
 */
export const TINY_A_F64 = path.resolve(process.cwd(), 'test/fixtures/tiny-a-f64');
/**
 * The E-series fixture (tools/make_gemma4_family_fixtures.py): per-layer embeddings, 4 KV-shared layers
 * with a double-wide MLP, and a centroid-head assistant, with float64 goldens from transformers.
 */
export const GEMMA4_E_TINY = path.resolve(process.cwd(), 'test/fixtures/gemma4-e-tiny');
/**
 * The MoE fixture (26B-A4B's structure): a dense MLP beside 8 experts (top-4, 8-bit router), K = V on the
 * full layer, a dense-head assistant, with float64 goldens from transformers (eager experts, router in float64).
 */
export const GEMMA4_MOE_TINY = path.resolve(process.cwd(), 'test/fixtures/gemma4-moe-tiny');
/** The page's demo model (a trained model of Gemma 4's structure, tools/demo), q4 variant. */
export const DEMO = path.resolve(process.cwd(), 'public/demo');
/**
 * The demo model's goldens, compacted from the device run's float64 and transformers-f32 files
 * (tools/demo/extract_goldens.py; see its README): a subset of the prompt's logit rows and act.final_norm.
 */
export const DEMO_F64 = path.resolve(process.cwd(), 'test/fixtures/demo');

export interface Golden {
  json: {
    prompt: number[];
    greedy: number[];
    bonus_token: number;
    draft: { position_id: number; tokens: number[] };
    mtp_tokens: number[];
    /** tiny-a-f64 only: sha256 of the model files the goldens were computed from. */
    checkpoint?: Record<string, string>;
    [k: string]: unknown;
  };
  tensor(name: string): Promise<{ shape: number[]; data: Float64Array }>;
  names: string[];
}

export async function loadGolden(dir = TINY_A): Promise<Golden> {
  const json = JSON.parse(readFileSync(path.join(dir, 'golden.json'), 'utf8'));
  return { json, ...(await openTensors(path.join(dir, 'golden.safetensors'))) };
}

/**
 * transformers' own Gemma 4 code run with the model in float32 on tiny-a (tools/make_f32_yardstick.py): the same
 * tensor names as the goldens. NMSE against tiny-a-f64 says what the library itself achieves in f32. `dir`: another
 * goldens folder with its own yardstick (DEMO_F64).
 */
export async function loadTransformersF32(dir = TINY_A_F64): Promise<Pick<Golden, 'tensor' | 'names'>> {
  return openTensors(path.join(dir, 'transformers-f32.safetensors'));
}

async function openTensors(file: string): Promise<Pick<Golden, 'tensor' | 'names'>> {
  const header = await readSafetensorsHeader(await nodeFileSource(file));
  const byName = new Map(header.tensors.map((t) => [t.name, t]));
  return {
    names: [...byName.keys()],
    async tensor(name) {
      const t = byName.get(name);
      if (!t) throw new Error(`${path.basename(file)}: tensor ${name} missing`);
      return { shape: [...t.shape], data: toFloat64(await readTensorBytes(t), t.dtype) };
    },
  };
}

export async function tinyTarget(): Promise<Checkpoint> {
  return openCheckpointDir(path.join(TINY_A, 'target'));
}
export async function tinyAssistant(): Promise<Checkpoint> {
  return openCheckpointDir(path.join(TINY_A, 'assistant'));
}
export async function demoTarget(): Promise<Checkpoint> {
  return openCheckpointDir(path.join(DEMO, 'target'));
}
export async function demoAssistant(): Promise<Checkpoint> {
  return openCheckpointDir(path.join(DEMO, 'assistant'));
}

/**
 * [T, kv_heads, head_dim] values as [kv_heads, T, head_dim]. tiny-a's F32 goldens store their
 * shared_kv.sliding_attention.* that way under a [kv_heads, T, head_dim] label (make_tiny_a_fixture.py saves a
 * transposed, non-contiguous tensor's memory); tiny-a-f64 stores both layer types as labelled.
 */
export function kvHeadMajor(tokenMajor: Float64Array, kvHeads: number, T: number, headDim: number): Float64Array {
  const out = new Float64Array(tokenMajor.length);
  for (let h = 0; h < kvHeads; h++)
    for (let t = 0; t < T; t++)
      for (let i = 0; i < headDim; i++) out[(h * T + t) * headDim + i] = tokenMajor[(t * kvHeads + h) * headDim + i];
  return out;
}

export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new Error(`length ${a.length} vs ${b.length}`);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

/**
 * An NMSE bound B that holds against `truth` (the float64 goldens), moved to another reference `other` of
 * the same tensor (the shared F32 goldens, which carry transformers' f32 noise) by the triangle inequality:
 * |e - other| <= |e - truth| + |truth - other| <= sqrt(B) |truth| + |truth - other|, so
 * NMSE(e, other) <= (sqrt(B) |truth| + |truth - other|)^2 / |other|^2.
 */
export function nmseTransport(B: number, truth: ArrayLike<number>, other: ArrayLike<number>): number {
  let t2 = 0,
    d2 = 0,
    o2 = 0;
  for (let i = 0; i < truth.length; i++) {
    t2 += truth[i] ** 2;
    d2 += (truth[i] - other[i]) ** 2;
    o2 += other[i] ** 2;
  }
  return (Math.sqrt(B * t2) + Math.sqrt(d2)) ** 2 / o2;
}

/** Normalised mean squared error: sum (a-b)^2 / sum b^2. */
export function nmse(a: ArrayLike<number>, ref: ArrayLike<number>): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < ref.length; i++) {
    num += (a[i] - ref[i]) ** 2;
    den += ref[i] ** 2;
  }
  return num / den;
}
