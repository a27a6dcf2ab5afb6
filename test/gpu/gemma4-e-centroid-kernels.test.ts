/**
 * The centroid head op (src/model/gemma4/e-series/centroid-head-op.ts, shaders/centroid_head.wgsl) at the real assistants'
 * cluster geometry (2048 centroids, top 32; docs/GEMMA4-FAMILY.md section 7) with fewer tokens per cluster:
 * - the chosen clusters are exactly the top 32 of the GPU's own centroid logits in the reference's order
 *   (descending, ties to the lower index: the centroid rows repeat, so many logits tie, across the cut too);
 * - the scored tokens are those clusters' token_ordering rows, the same from an I32 and an I64 ordering;
 * - the scored logits are the embedding rows' dot products within f32 rounding of float64, from a 4-bit
 *   embedding split into row parts; the token is the scored token of the first largest logit;
 * - the CPU reference (src/reference/gemma4/e-series/centroid-head.ts) on the same inputs picks the same token.
 */
import { describe, expect, it } from 'vitest';
import { storageBuffer } from '../../src/gpu/buffers.ts';
import type { DenseLinear } from '../../src/format/model-description.ts';
import { CentroidHeadOp, fullLogits, type GpuCentroidHead } from '../../src/model/gemma4/e-series/centroid-head-op.ts';
import { centroidHead, DTYPE_MIN } from '../../src/reference/gemma4/e-series/centroid-head.ts';
import { topKIndices } from '../../src/reference/gemma4/moe/moe.ts';
import { ADAPTER, Rand, bf16Rne, bytesOf, type Lab, useLab } from './helpers/kernel-lab.ts';
import { affineLinear, uploadTensors } from './helpers/linears.ts';

const C = 2048;
const TOP = 32;
const PER = 4;
const V = C * PER;
const h = 64;

describe(`centroid head op (${ADAPTER})`, () => {
  let lab: Lab;
  useLab((l) => (lab = l));

  async function setup(r: Rand, orderingDtype: 'I32' | 'I64') {
    // 300 distinct centroid rows, repeated: every logit ties with six or seven others
    const base = Float32Array.from({ length: 300 * h }, () => r.normal(0.3));
    const cw = new Float32Array(C * h);
    for (let c = 0; c < C; c++) cw.set(base.subarray(((c * 7) % 300) * h, (((c * 7) % 300) + 1) * h), c * h);
    const perm = Array.from({ length: V }, (_, i) => i);
    for (let i = V - 1; i > 0; i--) {
      const j = r.int(i + 1);
      [perm[i], perm[j]] = [perm[j], perm[i]];
    }
    const ord =
      orderingDtype === 'I32' ? bytesOf(Int32Array.from(perm)) : bytesOf(BigInt64Array.from(perm, (x) => BigInt(x)));
    const { refs, gpu } = await uploadTensors(lab, [
      { name: 'c.weight', dtype: 'F32', shape: [C, h], data: bytesOf(cw) },
      { name: 'ord', dtype: orderingDtype, shape: [V], data: ord },
    ]);
    const centroids: DenseLinear = { kind: 'dense', name: 'c', outFeatures: C, inFeatures: h, weight: refs[0] };
    const embed = await affineLinear(lab, r, { N: V, K: h, bits: 4, gs: 64, rowsPerPart: 1000 });
    const head: GpuCentroidHead = {
      numCentroids: C,
      topK: TOP,
      centroids: { desc: centroids, weight: gpu[0] },
      tokenOrdering: gpu[1],
      orderingStride: orderingDtype === 'I64' ? 2 : 1,
    };
    return { head, embed, cw: Float64Array.from(cw), perm };
  }

  for (const round of [false, true]) {
    it(`top-32 of 2048 with ties, scored tokens and logits, I32 == I64 ordering (${round ? 'bf16' : 'f32'})`, async () => {
      const r = new Rand(round ? 5 : 4);
      const y = Float32Array.from({ length: h }, () => r.normal(1));
      const yb = lab.f32(y);
      const results = [];
      for (const dtype of ['I32', 'I64'] as const) {
        const { head, embed, cw, perm } = await setup(new Rand(round ? 15 : 14), dtype); // the same data for both
        const op = new CentroidHeadOp(lab.device, head, embed.lin, 2);
        const tok = lab.own(storageBuffer(lab.device, 16, 'tok'));
        try {
          await lab.run((rec) => {
            op.record(rec, yb, tok, round);
            op.capture(rec, 1);
          });
          const cap = await op.read(2);
          const n = TOP * PER;
          const cl = cap.centroidLogits.subarray(C, 2 * C);
          const sel = cap.selected.subarray(n, 2 * n);
          const lg = cap.selectedLogits.subarray(n, 2 * n);
          // the clusters: the reference's top-k order on the GPU's own centroid logits
          const clusters = topKIndices(cl, TOP);
          const ties = clusters.filter((c, i) => i > 0 && cl[c] === cl[clusters[i - 1]]).length;
          expect(ties, 'ties among the chosen clusters').toBeGreaterThan(0);
          // the cut falls inside a group of equal logits: the lower indices of it are chosen, the others not
          const cut = cl[clusters[TOP - 1]];
          const atCut = [...cl.keys()].filter((c) => cl[c] === cut);
          expect(atCut.length, 'centroids tied with the last chosen one').toBeGreaterThan(
            clusters.filter((c) => cl[c] === cut).length,
          );
          const expected = clusters.flatMap((c) => perm.slice(c * PER, (c + 1) * PER));
          expect([...sel]).toEqual(expected);
          // scored logits: dot products of the dequantized rows (f32 values; bf16 when rounding) with y
          let worst = 0;
          for (let j = 0; j < n; j++) {
            let s = 0;
            let mag = 0;
            for (let k = 0; k < h; k++) {
              const wv = Math.fround(embed.w[sel[j] * h + k]);
              const w = round ? bf16Rne(wv) : wv;
              s += w * y[k];
              mag += Math.abs(w * y[k]);
            }
            const exact = round ? bf16Rne(Math.fround(s)) : s;
            // f32: the dequantization and the compensated sum; bf16: one bf16 step more (the output rounding may go either way)
            const bound = (round ? Math.abs(exact) * 2 ** -7 : 0) + 4 * mag * 2 ** -24;
            worst = Math.max(worst, Math.abs(lg[j] - exact) / bound);
            expect(Math.abs(lg[j] - exact), `scored logit ${j}`).toBeLessThanOrEqual(bound);
          }
          const best = lg.indexOf(Math.max(...lg));
          const token = (await lab.readU32(tok, 1))[0];
          expect(token).toBe(sel[best]);
          // the CPU reference (float64) on the same weights picks the same token (f32: bf16 rounding may reorder
          // close logits)
          const ref = centroidHead(
            {
              centroids: { out: C, in: h, w: cw },
              tokenOrdering: Int32Array.from(perm),
              embed: { out: V, in: h, w: embed.w },
              topK: TOP,
            },
            Float64Array.from(y),
          );
          if (!round) expect(token, 'token vs the CPU reference').toBe(ref.token);
          // the full row: the fill outside the scored tokens (transformers' min - 1, vLLM's dtype minimum)
          const full = fullLogits(cap, 2, V, 'min-minus-one').subarray(V, 2 * V);
          const vllm = fullLogits(cap, 2, V, DTYPE_MIN.bf16).subarray(V, 2 * V);
          const min = Math.min(...lg);
          expect(full.filter((x) => x === Math.fround(min - 1)).length).toBe(V - n);
          expect(vllm.filter((x) => x === Math.fround(DTYPE_MIN.bf16)).length).toBe(V - n);
          console.log(
            `centroid head ${dtype} ${round ? 'bf16' : 'f32'}: ${ties} tied neighbours among the top ${TOP}, worst scored-logit error / bound ${worst.toFixed(3)}, token ${token}`,
          );
          results.push({ sel: [...sel], lg: [...lg], token });
        } finally {
          op.destroy();
        }
      }
      expect(results[1]).toEqual(results[0]);
    });
  }
});
