//#include "common.wgsl"
// expert_lanes: one routed expert's matvec per (row, slot) of a MoE layer (Gemma 4 26B-A4B; the CPU twin is
// src/reference/gemma4/moe/moe.ts expertsRow), y[s, n] = sum_k x[s / XDIV, k] * W_e[n, k] with e = ids[s], for the
// stacked expert tensors of MLX's SwitchLinear ([E, N, K] packed: expert e is rows e N .. e N + N - 1 of one
// [E N, K] matrix, so feature n of expert e is feature e N + n of that matrix). Slot s = m k + j is row m's j-th
// chosen expert; XDIV = k for gate / up (x: the M rows of pre_feedforward_layernorm_2's output) and 1 for down
// (x: the slots' own GeGLU rows). The expert ids live on the GPU (moe.wgsl route): no readback, and only the
// chosen experts' weights are read.
//
// Arithmetic: exactly matmul_lanes.wgsl's for one row (the engine's exact affine matvec on software adapters):
// per chunk of 32 weights chunk_dot, the group's chunks added in order, hsum, then scale * qx and bias' * sx
// (sx = affine_xsum of the slot's x row) into a Neumaier total over the groups; test/gpu/gemma4-moe-kernels
// checks it byte for byte against ops.matmul on each expert's slice. One workgroup serves one slot, and a slot's
// arithmetic depends on its x row, its expert and K only: never on M, on the slot's place, or on other rows. So
// a verify block row runs exactly the arithmetic of a chain step (experts are computed per row, never grouped).
//
// GROUPED = 1 (policy moe-grouped, verify blocks only): the stand-in for fast MoE kernels that put the rows routed
// to one expert into one matmul (mlx-lm SwitchGLU's sorted gather_qmm; fused MoE kernels), whose reduction
// depends on how many rows it holds: the groups of K are cut into splits[s] contiguous ranges (splits[s] = the
// number of the block's rows routed to this slot's expert; ranges as ops.splitRanges), each range reduced with
// the exact arithmetic above from zero, the range totals added in order in plain f32. One row per expert (every
// chain step) is one range: the exact bytes.
//
// Parts: a stacked tensor too large for one binding is uploaded as expert ranges [E0, E1); a dispatch per part
// runs every slot and the slots whose expert lies outside the part return at once (uniformly per workgroup).
// Relaxed-math exactness: one stream. One (row, slot) per workgroup, the same loop over an expert's groups for every row.
//#include "matmul_lanes.wgsl"

@group(0) @binding(9) var<storage, read> ids: array<u32>;     // [slots] expert of each slot (moe.wgsl route)
@group(0) @binding(10) var<storage, read> splits: array<u32>; // [slots] GROUPED only: K ranges of the slot

override XDIV: u32 = 1u;
override E0: u32 = 0u;
override E1: u32 = 0xFFFFFFFFu;
override GROUPED: u32 = 0u;

// x loaded by every invocation (as matmul_lanes_loadx.wgsl): the values are the same however they arrive.
fn x_chunk(b: u32, lane: u32) -> V8 {
  return V8(x4[b], x4[b + 1u], x4[b + 2u], x4[b + 3u], x4[b + 4u], x4[b + 5u], x4[b + 6u], x4[b + 7u]);
}
fn x_hold(b: u32, lane: u32) -> vec4<f32> { return vec4<f32>(0.0); }
fn x_pair(b: u32, held: vec4<f32>, i: u32) -> mat2x4<f32> { return mat2x4<f32>(x4[b + 2u * i], x4[b + 2u * i + 1u]); }

// Groups g0 .. g1 - 1 of four features (stacked rows nc; experts keep MLX's layout, WT = 0) for x row xm: matmul_lanes.wgsl lanes_body's loop body.
fn expert_range(nc: vec4<u32>, xm: u32, g0: u32, g1: u32) -> vec4<f32> {
  let chunks_per_group = P.group_size / 32u;
  let groups = P.K / P.group_size;
  let xr = xm * (P.x_stride / 4u);
  var s = vec4<f32>(0.0);
  var c = vec4<f32>(0.0);
  for (var g = g0; g < g1; g++) {
    var q0 = vec4<f32>(0.0);
    var q1 = vec4<f32>(0.0);
    var q2 = vec4<f32>(0.0);
    var q3 = vec4<f32>(0.0);
    for (var j = 0u; j < chunks_per_group; j++) {
      let ci = g * chunks_per_group + j;
      let X = x_chunk(xr + 8u * ci, 0u);
      q0 += chunk_dot(unpack_chunk(nc.x, ci), X);
      q1 += chunk_dot(unpack_chunk(nc.y, ci), X);
      q2 += chunk_dot(unpack_chunk(nc.z, ci), X);
      q3 += chunk_dot(unpack_chunk(nc.w, ci), X);
    }
    let gi = nc * groups + vec4<u32>(g);
    let scale = vec4<f32>(scale_at(gi.x), scale_at(gi.y), scale_at(gi.z), scale_at(gi.w));
    let bias = vec4<f32>(bias_at(gi.x), bias_at(gi.y), bias_at(gi.z), bias_at(gi.w)) + scale * half_code();
    ksum4_add(&s, &c, scale * vec4<f32>(hsum(q0), hsum(q1), hsum(q2), hsum(q3)));
    ksum4_add(&s, &c, bias * xs[xm * groups + g]);
  }
  return s + c;
}

// P.M: slots; P.N: features per expert; P.K, P.group_size, P.x_stride (x rows), P.y_stride (slot rows), P.round.
@compute @workgroup_size(WG)
fn expert_lanes(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
  let blocks = (P.N + 4u * WG - 1u) / (4u * WG);
  let b = linear_workgroup(wid, nwg);
  let slot = b / blocks;
  if (slot >= P.M) { return; }
  let e = ids[slot];
  if (e < E0 || e >= E1) { return; }
  let n = vec4<u32>((b % blocks) * 4u * WG + lid) + vec4<u32>(0u, WG, 2u * WG, 3u * WG);
  let nc = (e - E0) * P.N + min(n, vec4<u32>(P.N - 1u)); // features past N compute a valid row, not stored
  let xm = slot / XDIV;
  let groups = P.K / P.group_size;
  var out: vec4<f32>;
  if (GROUPED == 1u) {
    let parts = max(splits[slot], 1u);
    let per = (groups + parts - 1u) / parts;
    out = expert_range(nc, xm, 0u, min(per, groups));
    for (var lo = per; lo < groups; lo += per) { out = out + expert_range(nc, xm, lo, min(lo + per, groups)); }
  } else {
    out = expert_range(nc, xm, 0u, groups);
  }
  let yr = slot * P.y_stride + P.n_offset;
  for (var f = 0u; f < 4u; f++) {
    if (n[f] < P.N) { y[yr + n[f]] = select(out[f], round_bf16(out[f]), P.round == 1u); }
  }
}
