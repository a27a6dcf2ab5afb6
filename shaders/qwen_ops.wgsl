//#include "qwen_common.wgsl"
// The Qwen3.5 ops beside Gated DeltaNet: partial RoPE (docs/QWEN35.md 3.1: pairs (i, i + rot/2) within
// the first `rot` dims of each head, then an optional exact power-of-two scale), the attention output
// gate (sigmoid of the gate half of q_proj), SwiGLU and the residual add. Element-wise or per head row:
// each output's arithmetic is independent of the dispatch size.
// Relaxed-math exactness: one stream. One fixed expression per element or row; the row count only sizes the dispatch.
override WG: u32 = 64u;

struct Params {
  M: u32, heads: u32, d: u32, rot: u32,
  pos0: u32, table_half: u32, round: u32, n: u32,
  in_stride: u32, gate_off: u32, scale: f32, _pad: u32,
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read> cos_t: array<f32>; // [position][table_half]
@group(0) @binding(3) var<storage, read> sin_t: array<f32>;
@group(0) @binding(4) var<storage, read> qg: array<f32>;    // q_proj rows: per head [query, gate]
@group(0) @binding(5) var<storage, read> b: array<f32>;

fn r(v: f32) -> f32 { return select(v, round_bf16(v), P.round == 1u); }
fn gid(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 { return linear_workgroup(wid, nwg) * WG + lid; }

// One invocation per (row, head) of x [M, heads, d].
@compute @workgroup_size(WG)
fn partial_rope(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
  let mh = gid(wid, nwg, lid);
  if (mh >= P.M * P.heads) { return; }
  let base = mh * P.d;
  let half = P.rot / 2u;
  let tb = (P.pos0 + mh / P.heads) * P.table_half;
  for (var i = 0u; i < half; i++) {
    let v = rope_pair(x[base + i], x[base + i + half], cos_t[tb + i], sin_t[tb + i], P.round == 1u);
    x[base + i] = v.x;
    x[base + i + half] = v.y;
  }
  if (P.scale != 1.0) {
    for (var i = 0u; i < P.d; i++) { x[base + i] = x[base + i] * P.scale; }
  }
}

// x [M, heads, d] *= sigmoid(gate), the gate of (row m, head h) at qg[(m heads + h) in_stride + gate_off].
@compute @workgroup_size(WG)
fn out_gate(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
  let i = gid(wid, nwg, lid);
  if (i >= P.M * P.heads * P.d) { return; }
  let mh = i / P.d;
  x[i] = r(x[i] * sigmoid_ref(qg[mh * P.in_stride + P.gate_off + i % P.d]));
}

// x = silu(x) * b (x holds gate(h), b up(h)).
@compute @workgroup_size(WG)
fn swiglu(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
  let i = gid(wid, nwg, lid);
  if (i >= P.n) { return; }
  x[i] = r(r(silu_ref(x[i])) * b[i]);
}

// x = x + b (the residual stream plus a sublayer's output).
@compute @workgroup_size(WG)
fn add(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
       @builtin(local_invocation_index) lid: u32) {
  let i = gid(wid, nwg, lid);
  if (i >= P.n) { return; }
  x[i] = r(x[i] + b[i]);
}
