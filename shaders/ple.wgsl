//#include "common.wgsl"
// The two element-wise ops of Gemma 4's per-layer embeddings (E2B / E4B; docs/GEMMA4-FAMILY.md section 4)
// that no dense kernel has. Each element's arithmetic is one fixed expression, independent of the dispatch
// size and of which row it sits in: a verify block's rows and a chain step's row compute the same bits.
// CPU twin: src/reference/gemma4/e-series/ple.ts (perLayerInputs, pleContribution); used by src/model/gemma4/e-series/ple-ops.ts.
// Relaxed-math exactness: one stream. One fixed expression per element; the row count only sizes the dispatch.
override WG: u32 = 64u;

struct Params {
  n: u32,        // elements
  width: u32,    // gate: elements per row of a (P)
  b_stride: u32, // gate: floats per row of b (L * P)
  b_off: u32,    // gate: offset of this layer's slice in a row of b (l * P)
  scale: f32,    // scale: the factor
  round: u32,
  _p0: u32, _p1: u32,
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read_write> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;

fn r(v: f32) -> f32 { return select(v, round_bf16(v), P.round == 1u); }

// a = a * scale: the per-layer projection's H^-0.5 (bf16-rounded as MLX multiplies it), applied before the
// per-slice RMSNorm, which it does not commute with (eps).
@compute @workgroup_size(WG)
fn scale(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) lid: u32) {
  let i = linear_workgroup(wid, nwg) * WG + lid;
  if (i >= P.n) { return; }
  a[i] = r(a[i] * P.scale);
}

// a[m, c] = gelu_tanh(a[m, c]) * b[m, b_off + c] for c < width: the per-layer input gate, a = gate_l(h) [M, P],
// b = every layer's combined per-layer inputs [M, L * P]. Exactly elementwise.wgsl geglu's arithmetic, with
// the second operand read from layer l's slice of each row.
@compute @workgroup_size(WG)
fn gate(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = linear_workgroup(wid, nwg) * WG + lid;
  if (i >= P.n) { return; }
  let m = i / P.width;
  let c = i - m * P.width;
  a[i] = r(r(gelu_tanh(a[i])) * b[m * P.b_stride + P.b_off + c]);
}
