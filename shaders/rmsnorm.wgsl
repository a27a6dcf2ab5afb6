//#include "common.wgsl"
// RMSNorm over rows of length D: v = x * (mean(x^2) + eps)^-1/2 * w   (w used as is; weightless: w = 1).
// mode 0: out = v.  mode 1 (residual): out = (out + v) * post_scale  (post_scale = layer_scalar or 1).
// One invocation per row, sequential sums: row-invariant.
// CPU twin: src/reference/ops.ts rmsNorm (float64); test: test/gpu/kernels-norm-rope.test.ts.
// Relaxed-math exactness: one stream. Every entry (main, rows_wg, qkv_rows) gives each row (or position) its own
// invocation or workgroup and the same code whatever the row count.
override WG: u32 = 64u;

struct Params {
  rows: u32, D: u32, in_stride: u32, out_stride: u32,
  eps: f32, has_weight: u32, mode: u32, round: u32,
  post_scale: f32,
  then_norm: u32,  // rows_wg only: 1 = then normalise the row just written into out2 (weight w2)
  has_weight2: u32,
  sums_group: u32, // rows_wg only: > 0 = then write the final row's group sums (this group size) to xs
  // rows_wg only: rot_pairs > 0 = then rotate-half RoPE in place (rope.wgsl), rows being heads of
  // positions pos0 + row / heads
  rot_pairs: u32, heads: u32, pos0: u32, table_half: u32,
  // qkv_rows only: the q head rows (rows past them are k's kv_rows, then v's), k's heads per position
  q_rows: u32, kv_rows: u32, kv_heads: u32,
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<u32>; // bf16 pairs (ignored when has_weight == 0)
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
// rows_wg only (see there).
@group(0) @binding(4) var<storage, read> w2: array<u32>;
@group(0) @binding(5) var<storage, read_write> out2: array<f32>;
@group(0) @binding(6) var<storage, read_write> xs: array<f32>;
@group(0) @binding(7) var<storage, read> cos_t: array<f32>; // [position][table_half]
@group(0) @binding(8) var<storage, read> sin_t: array<f32>;

fn r(v: f32) -> f32 { return select(v, round_bf16(v), P.round == 1u); }

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let row = linear_workgroup(wid, nwg) * WG + lid;
  if (row >= P.rows) { return; }
  let xb = row * P.in_stride;
  let ob = row * P.out_stride;
  var ss = vec2<f32>(0.0);
  for (var i = 0u; i < P.D; i++) { let v = x[xb + i]; ss = ksum_add(ss, v * v); }
  let inv = rsqrt_ref(ksum_value(ss) / f32(P.D) + P.eps);
  for (var i = 0u; i < P.D; i++) {
    var v = x[xb + i] * inv;
    if (P.has_weight == 1u) { v = v * bf16_to_f32(u16_at(w[i >> 1u], i)); }
    v = r(v); // one rounding, as MLX's fused rms_norm
    if (P.mode == 1u) {
      let s = r(out[ob + i] + v);
      out[ob + i] = r(s * P.post_scale);
    } else {
      out[ob + i] = v;
    }
  }
}

// ---- rows_wg: the GPU form (ops.rmsnorm picks it on hardware adapters, src/gpu/kernel-class.ts) ----
// One workgroup per row: invocation t sums the squares of elements t, t + WG, ... (Neumaier), the
// partial sums are merged by a fixed binary tree in workgroup memory (two-sum of the running sums,
// compensations added), and every invocation scales its own elements. The order of every addition
// is a function of D and WG only: row-invariant. Why: the one-invocation-per-row `main` walks 3840
// elements through dependent loads one at a time, 0.6 ms per call on an H200.
// Fused follow-ups, each computing exactly what a separate dispatch would (same values, same order),
// because on a GPU every dispatch of a decode step costs more than its arithmetic:
//   then_norm: the row just written (the residual stream, mode 1) is normalised again with w2 into
//     out2 (the next norm of the layer); each invocation re-reads its own elements, so their squares
//     are summed in the same order as a separate rows_wg call would;
//   rot_pairs: RoPE of the q/k head rows just normalised (rope.wgsl's arithmetic);
//   sums_group: the group sums of the final row (out2, else out) that the exact affine matmuls read
//     (matmul.wgsl affine_xsum: one compensated sequential sum per group), written to xs.
var<workgroup> part: array<vec2<f32>, WG>;

fn merge(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
  let s = ksum_add(vec2<f32>(a.x, 0.0), b.x); // two-sum of the running sums
  return vec2<f32>(s.x, s.y + (a.y + b.y));
}

// 1 / rms of the row from each invocation's partial sum of squares (all invocations get the value).
fn row_inv(ss: vec2<f32>, lid: u32) -> f32 {
  part[lid] = ss;
  for (var half = WG / 2u; half > 0u; half /= 2u) {
    workgroupBarrier();
    if (lid < half) { part[lid] = merge(part[lid], part[lid + half]); }
  }
  workgroupBarrier();
  let inv = rsqrt_ref(ksum_value(part[0]) / f32(P.D) + P.eps);
  workgroupBarrier(); // part is reused by a following row_inv
  return inv;
}

// Every loop below loads a batch of NB of an invocation's elements (i, i + WG, .., those in the row; or,
// for the group sums, NB consecutive ones of a group) into registers before their steps of the chain,
// which then runs on the registers in the same order: the same operations as one load per step, but NB
// loads in flight instead of one. Why: a decode step runs one workgroup per row, far too few to hide
// memory latency by occupancy, and each step of a chain waited for its own load; on an H200 a norm with
// its group sums took ~60 us (profiled chain token, 2026-12-02) for 15 KiB of data.
const NB: u32 = 8u;

struct Batch { v: array<f32, NB> }
// Whether element u of the batch at i is in the row (the batch's elements are i + u WG).
fn in_row(i: u32, u: u32) -> bool { return i + u * WG < P.D; }
fn load_x(b: u32, i: u32) -> Batch {
  var q: Batch;
  for (var u = 0u; u < NB; u++) { if (in_row(i, u)) { q.v[u] = x[b + i + u * WG]; } }
  return q;
}
fn load_out(b: u32, i: u32) -> Batch {
  var q: Batch;
  for (var u = 0u; u < NB; u++) { if (in_row(i, u)) { q.v[u] = out[b + i + u * WG]; } }
  return q;
}
// The weights of the batch at i (w, or w2 with `second`), as floats; unread (0) where the norm has no
// weight, whose binding is then a placeholder.
fn load_w(i: u32, second: bool) -> Batch {
  var q: Batch;
  for (var u = 0u; u < NB; u++) {
    let k = i + u * WG;
    if (!in_row(i, u)) { continue; }
    if (second && P.has_weight2 == 1u) { q.v[u] = bf16_to_f32(u16_at(w2[k >> 1u], k)); }
    if (!second && P.has_weight == 1u) { q.v[u] = bf16_to_f32(u16_at(w[k >> 1u], k)); }
  }
  return q;
}
// NB consecutive values of the final row (out2 with the next norm, else out) from offset e.
fn load_final(e: u32) -> Batch {
  var q: Batch;
  if (P.then_norm == 1u) {
    for (var u = 0u; u < NB; u++) { q.v[u] = out2[e + u]; }
  } else {
    for (var u = 0u; u < NB; u++) { q.v[u] = out[e + u]; }
  }
  return q;
}

// An element of the row after the norm (and the residual, mode 1), given its x, out, weight and 1 / rms.
fn normed(xv: f32, ov: f32, wv: f32, inv: f32) -> f32 {
  var v = xv * inv;
  if (P.has_weight == 1u) { v = v * wv; }
  v = r(v); // one rounding, as MLX's fused rms_norm
  if (P.mode == 1u) {
    let s = r(ov + v);
    v = r(s * P.post_scale);
  }
  return v;
}

@compute @workgroup_size(WG)
fn rows_wg(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
  let row = linear_workgroup(wid, nwg); // uniform: the whole workgroup returns or none of it
  if (row >= P.rows) { return; }
  let xb = row * P.in_stride;
  let ob = row * P.out_stride;
  let span = NB * WG; // from one batch of an invocation to its next
  var ss = vec2<f32>(0.0);
  for (var i = lid; i < P.D; i += span) {
    let q = load_x(xb, i);
    for (var u = 0u; u < NB; u++) { if (in_row(i, u)) { ss = ksum_add(ss, q.v[u] * q.v[u]); } }
  }
  let inv = row_inv(ss, lid);
  var ss2 = vec2<f32>(0.0);
  for (var i = lid; i < P.D; i += span) {
    // Every load of the batch before its first store: a load after a store to `out` may not be moved
    // ahead of it (the compiler cannot tell the bindings apart), so it would wait again.
    let q = load_x(xb, i);
    let wq = load_w(i, false);
    var o: Batch;
    if (P.mode == 1u) { o = load_out(ob, i); }
    for (var u = 0u; u < NB; u++) {
      if (!in_row(i, u)) { continue; }
      let v = normed(q.v[u], o.v[u], wq.v[u], inv);
      out[ob + i + u * WG] = v;
      ss2 = ksum_add(ss2, v * v);
    }
  }
  if (P.then_norm == 1u) {
    let inv2 = row_inv(ss2, lid);
    for (var i = lid; i < P.D; i += span) {
      let o = load_out(ob, i);
      let wq = load_w(i, true);
      for (var u = 0u; u < NB; u++) {
        if (!in_row(i, u)) { continue; }
        var v = o.v[u] * inv2;
        if (P.has_weight2 == 1u) { v = v * wq.v[u]; }
        out2[ob + i + u * WG] = r(v);
      }
    }
  }
  if (P.rot_pairs > 0u) {
    // The q/k norm's RoPE (rope.wgsl's arithmetic): pair (i, i + D/2) of the row just written, read
    // back across invocations.
    storageBarrier();
    let half = P.D / 2u;
    let tb = (P.pos0 + row / P.heads) * P.table_half;
    for (var i = lid; i < P.rot_pairs; i += WG) {
      let c = cos_t[tb + i];
      let s = sin_t[tb + i];
      let r = rope_pair(out[ob + i], out[ob + i + half], c, s, P.round == 1u);
      out[ob + i] = r.x;
      out[ob + i + half] = r.y;
    }
  }
  if (P.sums_group > 0u) {
    storageBarrier(); // the row's final values, written by every invocation, are read across invocations
    let groups = P.D / P.sums_group;
    for (var g = lid; g < groups; g += WG) {
      let b = ob + g * P.sums_group;
      var sx = vec2<f32>(0.0);
      // sums_group is a multiple of 32 (ops.rmsnorm sums only for linears lanesFit accepts): whole batches
      for (var e = 0u; e < P.sums_group; e += NB) {
        let q = load_final(b + e);
        for (var u = 0u; u < NB; u++) { sx = ksum_add(sx, q.v[u]); }
      }
      xs[row * groups + g] = ksum_value(sx);
    }
  }
}

// ---- qkv_rows: an attention block's q, k and v norms in one dispatch (the GPU form) ----
// Rows 0 .. q_rows-1 are q's heads (x -> out, weight w, RoPE with `heads` heads per position), the next
// kv_rows k's (x_k -> out2, weight w2, RoPE with kv_heads heads per position), the last kv_rows v's (x_v ->
// out_v, no weight, no RoPE); every row has D elements, rows packed. Each row runs rows_wg's operations
// for its norm (mode 0, no next norm, no group sums) in the same order: the same bytes as three rows_wg
// dispatches (test/gpu/fused-ops.test.ts). Why: classic decode of a 12B on an H200 is bound by the CPU
// recording ~760 dispatches per token (~11-16 us each, docs/PERFORMANCE.md), and this removes two per layer.
// The rows' segment is uniform per workgroup, so the barriers below are in uniform control flow.
@group(0) @binding(9) var<storage, read> x_k: array<f32>;
@group(0) @binding(10) var<storage, read> x_v: array<f32>;
@group(0) @binding(11) var<storage, read_write> out_v: array<f32>;

fn seg_x(seg: u32, k: u32) -> f32 {
  if (seg == 0u) { return x[k]; }
  if (seg == 1u) { return x_k[k]; }
  return x_v[k];
}
fn seg_w(seg: u32, k: u32) -> f32 {
  if (seg == 0u) { return bf16_to_f32(u16_at(w[k >> 1u], k)); }
  return bf16_to_f32(u16_at(w2[k >> 1u], k)); // seg 1; v (seg 2) has no weight and never calls this
}
fn seg_out(seg: u32, k: u32) -> f32 {
  if (seg == 0u) { return out[k]; }
  return out2[k]; // seg 1: only q and k rows are rotated
}
fn seg_store(seg: u32, k: u32, v: f32) {
  if (seg == 0u) {
    out[k] = v;
  } else if (seg == 1u) {
    out2[k] = v;
  } else {
    out_v[k] = v;
  }
}

@compute @workgroup_size(WG)
fn qkv_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
  let row = linear_workgroup(wid, nwg);
  if (row >= P.q_rows + 2u * P.kv_rows) { return; }
  var seg = 0u;
  var lr = row; // the row within its segment
  var heads = P.heads;
  if (row >= P.q_rows) {
    seg = 1u;
    lr = row - P.q_rows;
    heads = P.kv_heads;
  }
  if (row >= P.q_rows + P.kv_rows) {
    seg = 2u;
    lr = row - P.q_rows - P.kv_rows;
  }
  let b = lr * P.D;
  let span = NB * WG;
  var ss = vec2<f32>(0.0);
  for (var i = lid; i < P.D; i += span) {
    var q: Batch;
    for (var u = 0u; u < NB; u++) { if (in_row(i, u)) { q.v[u] = seg_x(seg, b + i + u * WG); } }
    for (var u = 0u; u < NB; u++) { if (in_row(i, u)) { ss = ksum_add(ss, q.v[u] * q.v[u]); } }
  }
  let inv = row_inv(ss, lid);
  for (var i = lid; i < P.D; i += span) {
    var q: Batch;
    var wq: Batch;
    for (var u = 0u; u < NB; u++) {
      if (!in_row(i, u)) { continue; }
      q.v[u] = seg_x(seg, b + i + u * WG);
      if (seg < 2u) { wq.v[u] = seg_w(seg, i + u * WG); }
    }
    for (var u = 0u; u < NB; u++) {
      if (!in_row(i, u)) { continue; }
      var v = q.v[u] * inv;
      if (seg < 2u) { v = v * wq.v[u]; }
      seg_store(seg, b + i + u * WG, r(v)); // one rounding, as MLX's fused rms_norm
    }
  }
  if (seg < 2u && P.rot_pairs > 0u) {
    storageBarrier(); // as rows_wg: the row just written is read across invocations
    let half = P.D / 2u;
    let tb = (P.pos0 + lr / heads) * P.table_half;
    for (var i = lid; i < P.rot_pairs; i += WG) {
      let rp = rope_pair(seg_out(seg, b + i), seg_out(seg, b + i + half), cos_t[tb + i], sin_t[tb + i], P.round == 1u);
      seg_store(seg, b + i, rp.x);
      seg_store(seg, b + i + half, rp.y);
    }
  }
}
