//#include "common.wgsl"
// The routing half of a Gemma 4 MoE layer (26B-A4B; docs/GEMMA4-FAMILY.md section 6) around the expert matvecs of
// moe_experts.wgsl: `route` (top-k and the routing weights from router.proj's scores), `group_counts` (policy
// moe-grouped: how many of a block's rows share each slot's expert) and `combine` (the weighted sum of a row's
// experts). One invocation per row (route), per slot (group_counts) or per output element (combine), each with
// a fixed sequential order: nothing depends on how many rows are dispatched.
// CPU twin: src/reference/gemma4/moe/moe.ts (routeRow, expertsRow).
// Relaxed-math exactness: one stream. Routing per row (one invocation per row, the same loops at any M); the row count only sizes
// the dispatch.
override WG: u32 = 64u;

struct Params {
  M: u32,     // rows
  E: u32,     // experts
  k: u32,     // experts per row
  H: u32,     // combine: output width
  order: u32, // route: 0 = MLX (top-k of the scores, softmax over the k), 1 = transformers (softmax over E, top-k, renormalise)
  round: u32, // 1: round outputs to bf16 (bf16 activation mode)
  root: f32,  // scale_rows: the router's root size H^-0.5 (as the runtime multiplies it)
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> scores: array<f32>;          // route: [M, E] router.proj output
@group(0) @binding(2) var<storage, read> expert_scale: array<u32>;    // route: per_expert_scale [E], bf16 pairs
@group(0) @binding(3) var<storage, read_write> ids: array<u32>;       // [M, k] chosen experts, descending score
@group(0) @binding(4) var<storage, read_write> weights: array<f32>;   // [M, k] their weights, same order
@group(0) @binding(5) var<storage, read_write> counts: array<u32>;    // group_counts: [M, k]
@group(0) @binding(6) var<storage, read> ys: array<f32>;              // combine: [M k, H] the slots' expert outputs
@group(0) @binding(7) var<storage, read_write> out: array<f32>;       // combine: [M, H]

fn r(v: f32) -> f32 { return select(v, round_bf16(v), P.round == 1u); }

// At most 256 experts and 32 per row (MoeTargetModel checks).
const MAX_E_WORDS: u32 = 8u;
const MAX_K: u32 = 32u;

// The top-k of v (row m's scores or probabilities) by descending value; ties to the LOWER expert id (a strict >
// while scanning ids upward), the order of torch.topk on distinct values and of the CPU reference (topKIndices).
// NaN never wins a comparison, so a row of NaN picks the lowest free ids.
fn top_k(m: u32, probs: bool, mx: f32, sum: f32) -> array<u32, MAX_K> {
  var taken: array<u32, MAX_E_WORDS>;
  var chosen: array<u32, MAX_K>;
  for (var j = 0u; j < P.k; j++) {
    var best = 0xFFFFFFFFu;
    var bv = 0.0;
    for (var e = 0u; e < P.E; e++) {
      if ((taken[e >> 5u] & (1u << (e & 31u))) != 0u) { continue; }
      let v = value(m, e, probs, mx, sum);
      if (best == 0xFFFFFFFFu || v > bv) { best = e; bv = v; }
    }
    taken[best >> 5u] |= 1u << (best & 31u);
    chosen[j] = best;
  }
  return chosen;
}

// Score of expert e, or (transformers) its softmax probability over all E, computed the same way everywhere.
fn value(m: u32, e: u32, probs: bool, mx: f32, sum: f32) -> f32 {
  let s = scores[m * P.E + e];
  if (!probs) { return s; }
  return r(exp_ref(s - mx) / sum);
}

@compute @workgroup_size(WG)
fn route(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) lid: u32) {
  let m = linear_workgroup(wid, nwg) * WG + lid;
  if (m >= P.M) { return; }
  let base = m * P.k;
  if (P.order == 0u) {
    // MLX (gemma4_text.py Router): top-k of the raw scores, softmax over those k (max = the first chosen).
    let c = top_k(m, false, 0.0, 1.0);
    let mx = scores[m * P.E + c[0]];
    var sum = 0.0;
    for (var j = 0u; j < P.k; j++) { sum += exp_ref(scores[m * P.E + c[j]] - mx); }
    for (var j = 0u; j < P.k; j++) {
      let p = r(exp_ref(scores[m * P.E + c[j]] - mx) / sum);
      ids[base + j] = c[j];
      weights[base + j] = r(p * bf16_to_f32(u16_at(expert_scale[c[j] >> 1u], c[j])));
    }
    return;
  }
  // transformers (Gemma4TextRouter.forward): softmax over all E (ids ascending), top-k, renormalise.
  var mx = scores[m * P.E];
  for (var e = 1u; e < P.E; e++) { mx = max(mx, scores[m * P.E + e]); }
  var sum = 0.0;
  for (var e = 0u; e < P.E; e++) { sum += exp_ref(scores[m * P.E + e] - mx); }
  let c = top_k(m, true, mx, sum);
  var top = 0.0;
  for (var j = 0u; j < P.k; j++) { top += value(m, c[j], true, mx, sum); }
  for (var j = 0u; j < P.k; j++) {
    let p = r(value(m, c[j], true, mx, sum) / top);
    ids[base + j] = c[j];
    weights[base + j] = r(p * bf16_to_f32(u16_at(expert_scale[c[j] >> 1u], c[j])));
  }
}

// transformers' router input (Gemma4TextRouter.forward): out[m, i] = (out[m, i] * router.scale[i]) * root, in
// place on the scale-free RMSNorm of h1 (binding 2 holds router.scale, bf16 pairs). MLX instead forms the weight
// bf16(scale * root) first and norms with it (MoeGpu routerNorm): the two differ by that rounding.
@compute @workgroup_size(WG)
fn scale_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
  let idx = linear_workgroup(wid, nwg) * WG + lid;
  if (idx >= P.M * P.H) { return; }
  let i = idx % P.H;
  out[idx] = r(r(out[idx] * bf16_to_f32(u16_at(expert_scale[i >> 1u], i))) * P.root);
}

// counts[s] = how many of the M rows chose slot s's expert (at least 1: its own row).
@compute @workgroup_size(WG)
fn group_counts(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
  let s = linear_workgroup(wid, nwg) * WG + lid;
  if (s >= P.M * P.k) { return; }
  let e = ids[s];
  var n = 0u;
  for (var m = 0u; m < P.M; m++) {
    for (var j = 0u; j < P.k; j++) {
      if (ids[m * P.k + j] == e) { n++; }
    }
  }
  counts[s] = n;
}

// out[m, i] = sum over row m's slots, in ascending expert id (transformers' eager experts; reference
// expertsRow 'expert-ascending'), of weight * y: each term and each partial sum rounded in bf16 mode.
@compute @workgroup_size(WG)
fn combine(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
  let idx = linear_workgroup(wid, nwg) * WG + lid;
  if (idx >= P.M * P.H) { return; }
  let m = idx / P.H;
  let i = idx % P.H;
  let base = m * P.k;
  var acc = 0.0;
  var last = 0u; // the expert id added last; the next is the smallest id above it
  for (var t = 0u; t < P.k; t++) {
    var j = 0xFFFFFFFFu;
    for (var q = 0u; q < P.k; q++) {
      let e = ids[base + q];
      if ((t == 0u || e > last) && (j == 0xFFFFFFFFu || e < ids[base + j])) { j = q; }
    }
    last = ids[base + j];
    acc = r(acc + r(weights[base + j] * ys[(base + j) * P.H + i]));
  }
  out[idx] = acc;
}
