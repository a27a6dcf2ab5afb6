//#include "qwen_common.wgsl"
// Gated DeltaNet (docs/QWEN35.md section 3.2), one entry point per op, each row's arithmetic a
// function of that row's inputs only (never of M or of the row's place in a block):
//   conv         c = silu(depthwise causal conv over [window; qkv rows])   one invocation per (t, ch)
//   conv_commit  window_out = the last K-1 rows of [window; first n rows of qkv]
//   qk_norm      q, k L2-normalised (eps 1e-6 on the sum of squares), q times Dk^-1/2
//   gates        g = exp(-exp(A_log) softplus(a + dt_bias)), beta = sigmoid(b)
//   recurrence   per value head h and value column j, token after token in order:
//                S <- g S; delta = (v - S^T k) beta; S <- S + k delta^T; o = S^T q
//   gated_norm   y = w * (o * (mean(o^2) + eps)^-1/2) * silu(z)
// A verify block runs the recurrence over its K tokens in the order K chain steps would, in the
// same pipeline, so row t's state and output are the chain's bytes; with `stage` the state after
// every token goes to S_stage (commit copies the accepted one), else S is updated in place (prefill).
//   recurrence_chunked  the same rule in the chunked (WY / UT-transform) form of fast verify and prefill
//                kernels (transformers torch_chunk_gated_delta_rule, fla chunk_gated_delta_rule): the
//                inexact policy gdn-chunked runs it for verify blocks only, so block rows differ from
//                chain steps in rounding (CPU twins: src/reference/qwen3_5/gdn-chunked.ts).
// CPU twins: src/reference/qwen3_5/gdn-ops.ts (float64); tests: test/gpu/qwen-kernels.test.ts.
// Relaxed-math exactness: one stream. Each row's arithmetic is a function of that row's inputs only; the recurrence runs rows in
// order through the same code.
override WG: u32 = 64u;
// Largest key head dim the recurrence holds per invocation (Qwen3.5 / 3.6 use 128).
const DK_MAX: u32 = 256u;

struct Params {
  M: u32, C: u32, K: u32, n: u32,
  Hk: u32, Hv: u32, Dk: u32, Dv: u32,
  stage: u32, round: u32, eps: f32, q_scale: f32,
  // 1: the state is stored in bf16 (policy gdn-state-bf16): a chain step's state is rounded before the next
  // token reads it, a block's stays f32 in registers between its tokens (the inexact mechanism)
  state_bf16: u32, _p0: u32, _p1: u32, _p2: u32,
}

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> window: array<f32>;          // [K-1, C] raw rows, oldest first
@group(0) @binding(2) var<storage, read> qkv: array<f32>;             // [M, C] raw in_proj_qkv rows
@group(0) @binding(3) var<storage, read_write> cbuf: array<f32>;      // [M, C] conv + silu output
@group(0) @binding(4) var<storage, read> convw: array<f32>;           // [C, K]
@group(0) @binding(5) var<storage, read_write> window_out: array<f32>;// [K-1, C]
@group(0) @binding(6) var<storage, read_write> qk: array<f32>;        // [M, 2 keyDim] normalised q, k
@group(0) @binding(7) var<storage, read> a_in: array<f32>;            // [M, Hv]
@group(0) @binding(8) var<storage, read> b_in: array<f32>;            // [M, Hv]
@group(0) @binding(9) var<storage, read> a_log: array<f32>;           // [Hv]
@group(0) @binding(10) var<storage, read> dt_bias: array<f32>;        // [Hv]
@group(0) @binding(11) var<storage, read_write> gb: array<f32>;       // [M, Hv, 2]: g, beta
@group(0) @binding(12) var<storage, read_write> S: array<f32>;        // [Hv, Dk, Dv]
@group(0) @binding(13) var<storage, read_write> S_stage: array<f32>;  // [M, Hv, Dk, Dv]
@group(0) @binding(14) var<storage, read_write> o: array<f32>;        // [M, Hv, Dv]
@group(0) @binding(15) var<storage, read> z: array<f32>;              // [M, Hv, Dv]
@group(0) @binding(16) var<storage, read> gnw: array<f32>;            // [Dv]
@group(0) @binding(17) var<storage, read_write> y: array<f32>;        // [M, Hv, Dv]
@group(0) @binding(18) var<storage, read_write> lg: array<f32>;       // [M, Hv] log decays (gdn-chunked)

fn r(v: f32) -> f32 { return select(v, round_bf16(v), P.round == 1u); }
fn stored(v: f32) -> f32 { return select(v, round_bf16(v), P.state_bf16 == 1u); }

fn gid(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 { return linear_workgroup(wid, nwg) * WG + lid; }

// Raw row `idx` of the sequence [window (K-1 rows); qkv rows], channel ch.
fn raw_at(idx: u32, ch: u32) -> f32 {
  let w = P.K - 1u;
  if (idx < w) { return window[idx * P.C + ch]; }
  return qkv[(idx - w) * P.C + ch];
}

@compute @workgroup_size(WG)
fn conv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = gid(wid, nwg, lid);
  if (i >= P.M * P.C) { return; }
  let t = i / P.C;
  let ch = i % P.C;
  // tap j reads row t - (K-1) + j of the token sequence: index t + j of [window; qkv]
  var s = 0.0;
  for (var j = 0u; j < P.K; j++) { s = s + convw[ch * P.K + j] * raw_at(t + j, ch); }
  cbuf[i] = r(silu_ref(s));
}

@compute @workgroup_size(WG)
fn conv_commit(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
  let i = gid(wid, nwg, lid);
  if (i >= (P.K - 1u) * P.C) { return; }
  window_out[i] = raw_at(P.n + i / P.C, i % P.C);
}

@compute @workgroup_size(WG)
fn qk_norm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
  let i = gid(wid, nwg, lid); // (t, which, key head)
  if (i >= P.M * 2u * P.Hk) { return; }
  let t = i / (2u * P.Hk);
  let wh = i % (2u * P.Hk); // which * Hk + head: q heads then k heads, as the channels are laid out
  let b = t * P.C + wh * P.Dk;
  var ss = vec2<f32>(0.0);
  for (var e = 0u; e < P.Dk; e++) { let v = cbuf[b + e]; ss = ksum_add(ss, v * v); }
  let inv = rsqrt_ref(ksum_value(ss) + 1e-6);
  let scale = select(1.0, P.q_scale, wh < P.Hk);
  let ob = t * 2u * P.Hk * P.Dk + wh * P.Dk;
  for (var e = 0u; e < P.Dk; e++) { qk[ob + e] = r(cbuf[b + e] * inv * scale); }
}

@compute @workgroup_size(WG)
fn gates(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) lid: u32) {
  let i = gid(wid, nwg, lid); // (t, value head)
  if (i >= P.M * P.Hv) { return; }
  let h = i % P.Hv;
  let sp = softplus_ref(a_in[i] + dt_bias[h]);
  gb[2u * i] = exp_ref(-(exp_ref(a_log[h]) * sp));
  gb[2u * i + 1u] = sigmoid_ref(b_in[i]);
}

// The log decays -(exp(A_log) softplus(a + dt_bias)) alone (the chunked form sums them), by the expression
// `gates` exponentiates.
@compute @workgroup_size(WG)
fn log_gates(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
  let i = gid(wid, nwg, lid); // (t, value head)
  if (i >= P.M * P.Hv) { return; }
  let h = i % P.Hv;
  lg[i] = -(exp_ref(a_log[h]) * softplus_ref(a_in[i] + dt_bias[h]));
}

@compute @workgroup_size(WG)
fn recurrence(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
  let i = gid(wid, nwg, lid); // (value head, value column): column j of S_h is this invocation's alone
  if (i >= P.Hv * P.Dv) { return; }
  let h = i / P.Dv;
  let j = i % P.Dv;
  let hk = h / (P.Hv / P.Hk);
  let kd = P.Hk * P.Dk;
  let sb = h * P.Dk * P.Dv + j; // S[h, e, j] at sb + e * Dv
  var col: array<f32, DK_MAX>;
  for (var e = 0u; e < P.Dk; e++) { col[e] = S[sb + e * P.Dv]; }
  for (var t = 0u; t < P.M; t++) {
    let g = gb[2u * (t * P.Hv + h)];
    let beta = gb[2u * (t * P.Hv + h) + 1u];
    let qb = t * 2u * kd + hk * P.Dk;
    let kb = qb + kd;
    for (var e = 0u; e < P.Dk; e++) { col[e] = col[e] * g; }
    var kv = vec2<f32>(0.0);
    for (var e = 0u; e < P.Dk; e++) { kv = ksum_add(kv, col[e] * qk[kb + e]); }
    let delta = (cbuf[t * P.C + 2u * kd + h * P.Dv + j] - ksum_value(kv)) * beta;
    for (var e = 0u; e < P.Dk; e++) { col[e] = col[e] + qk[kb + e] * delta; }
    var acc = vec2<f32>(0.0);
    for (var e = 0u; e < P.Dk; e++) { acc = ksum_add(acc, col[e] * qk[qb + e]); }
    o[(t * P.Hv + h) * P.Dv + j] = r(ksum_value(acc));
    if (P.stage == 1u) {
      let st = t * P.Hv * P.Dk * P.Dv + sb;
      for (var e = 0u; e < P.Dk; e++) { S_stage[st + e * P.Dv] = stored(col[e]); }
    }
  }
  if (P.stage == 0u) {
    for (var e = 0u; e < P.Dk; e++) { S[sb + e * P.Dv] = stored(col[e]); }
  }
}

@compute @workgroup_size(WG)
fn gated_norm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
  let i = gid(wid, nwg, lid); // (t, value head)
  if (i >= P.M * P.Hv) { return; }
  let b = i * P.Dv;
  var ss = vec2<f32>(0.0);
  for (var e = 0u; e < P.Dv; e++) { let v = o[b + e]; ss = ksum_add(ss, v * v); }
  let inv = rsqrt_ref(ksum_value(ss) / f32(P.Dv) + P.eps);
  for (var e = 0u; e < P.Dv; e++) { y[b + e] = r(gnw[e] * (o[b + e] * inv) * silu_ref(z[b + e])); }
}

// ---- the chunked (WY) form: policy gdn-chunked, verify blocks only ---------------------------------
// Rows per chunk (transformers' and fla's chunk_size): a verify block of K <= 64 tokens is one chunk.
const CHUNK: u32 = 64u;
// The most rows this kernel takes (ops.gdnRecurrenceChunked refuses more): a verify block, K <= 16 everywhere
// in the lab, so one chunk. The per-invocation arrays are sized for these rows, not for a whole chunk: sized
// for 64 (three 2080-float triangles, ~28 KB per invocation) the NVIDIA Vulkan driver failed to create the
// pipeline (VK_ERROR_UNKNOWN, H200, 2026-12-01). For M <= ROWS_MAX the arithmetic is the same either way.
const ROWS_MAX: u32 = 16u;
// Lower triangle of a ROWS_MAX x ROWS_MAX matrix, diagonal included: ROWS_MAX (ROWS_MAX + 1) / 2.
const TRI: u32 = 136u;

fn tri(t: u32, s: u32) -> u32 { return t * (t + 1u) / 2u + s; }

// Per value head h and value column j (as `recurrence`), for each chunk of L rows starting from its state
// S0 (column j of S_h), with the log decays G_t = sum_{u <= t} log g_u (cumulative within the chunk):
//   Pd[t, s] = exp(G_t - G_s), s <= t
//   A[t, s]  = ((k_t beta_t) . k_s) Pd[t, s], s < t        (the UT system, unit lower triangular)
//   QK[t, s] = (q_t . k_s) Pd[t, s], s <= t                (intra-chunk attention)
//   u = A^-1 (v beta)[:, j],  w = A^-1 (k beta e^G)         (forward substitution, key dims one by one)
//   v_new_t = u_t - w_t . S0;  o_t = (q_t e^{G_t}) . S0 + sum_{s <= t} QK[t, s] v_new_s
//   S_t = S0 e^{G_t} + sum_{s <= t} (k_s Pd[t, s]) v_new_s  (the chunk's state after row t, staged)
// In exact arithmetic this is `recurrence`; in f32 every row rounds differently. The log decays come from
// `log_gates`. Dot products over Dk are compensated (ksum), as in `recurrence`, so the difference is the
// form, not a plainer summation.
@compute @workgroup_size(WG)
fn recurrence_chunked(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                      @builtin(local_invocation_index) lid: u32) {
  let i = gid(wid, nwg, lid);
  if (i >= P.Hv * P.Dv) { return; }
  let h = i / P.Dv;
  let j = i % P.Dv;
  let hk = h / (P.Hv / P.Hk);
  let kd = P.Hk * P.Dk;
  let sb = h * P.Dk * P.Dv + j;
  let sFloats = P.Hv * P.Dk * P.Dv;
  var col: array<f32, DK_MAX>; // S0[:, j], then the state after each chunk
  for (var e = 0u; e < P.Dk; e++) { col[e] = S[sb + e * P.Dv]; }
  var G: array<f32, ROWS_MAX>;
  var eG: array<f32, ROWS_MAX>;
  var beta: array<f32, ROWS_MAX>;
  var Pd: array<f32, TRI>;
  var A: array<f32, TRI>;
  var QK: array<f32, TRI>;
  var u: array<f32, ROWS_MAX>;
  var w: array<f32, ROWS_MAX>;
  var wS: array<vec2<f32>, ROWS_MAX>;
  var vn: array<f32, ROWS_MAX>;
  for (var c0 = 0u; c0 < P.M; c0 += CHUNK) {
    let L = min(CHUNK, P.M - c0);
    var cum = 0.0;
    for (var t = 0u; t < L; t++) {
      let row = (c0 + t) * P.Hv + h;
      cum = cum + lg[row];
      G[t] = cum;
      eG[t] = exp_ref(cum);
      beta[t] = gb[2u * row + 1u];
    }
    for (var t = 0u; t < L; t++) {
      let qt = (c0 + t) * 2u * kd + hk * P.Dk;
      for (var s = 0u; s <= t; s++) {
        let ks = (c0 + s) * 2u * kd + kd + hk * P.Dk;
        var kk = vec2<f32>(0.0);
        var qq = vec2<f32>(0.0);
        for (var e = 0u; e < P.Dk; e++) {
          kk = ksum_add(kk, (qk[qt + kd + e] * beta[t]) * qk[ks + e]);
          qq = ksum_add(qq, qk[qt + e] * qk[ks + e]);
        }
        let p = exp_ref(G[t] - G[s]);
        Pd[tri(t, s)] = p;
        A[tri(t, s)] = ksum_value(kk) * p;
        QK[tri(t, s)] = ksum_value(qq) * p;
      }
    }
    // new values, column j: u_t = v_t beta_t - sum_{s < t} A[t, s] u_s
    for (var t = 0u; t < L; t++) {
      var acc = vec2<f32>(0.0);
      for (var s = 0u; s < t; s++) { acc = ksum_add(acc, A[tri(t, s)] * u[s]); }
      u[t] = cbuf[(c0 + t) * P.C + 2u * kd + h * P.Dv + j] * beta[t] - ksum_value(acc);
      wS[t] = vec2<f32>(0.0);
    }
    // decayed keys through the UT transform, one key dim at a time, read against S0: wS_t = w_t . S0
    for (var e = 0u; e < P.Dk; e++) {
      for (var t = 0u; t < L; t++) {
        let kt = (c0 + t) * 2u * kd + kd + hk * P.Dk;
        var acc = vec2<f32>(0.0);
        for (var s = 0u; s < t; s++) { acc = ksum_add(acc, A[tri(t, s)] * w[s]); }
        w[t] = (qk[kt + e] * beta[t]) * eG[t] - ksum_value(acc);
        wS[t] = ksum_add(wS[t], w[t] * col[e]);
      }
    }
    for (var t = 0u; t < L; t++) { vn[t] = u[t] - ksum_value(wS[t]); }
    for (var t = 0u; t < L; t++) {
      let qt = (c0 + t) * 2u * kd + hk * P.Dk;
      var inter = vec2<f32>(0.0);
      for (var e = 0u; e < P.Dk; e++) { inter = ksum_add(inter, (qk[qt + e] * eG[t]) * col[e]); }
      var intra = vec2<f32>(0.0);
      for (var s = 0u; s <= t; s++) { intra = ksum_add(intra, QK[tri(t, s)] * vn[s]); }
      o[((c0 + t) * P.Hv + h) * P.Dv + j] = r(ksum_value(inter) + ksum_value(intra));
    }
    // the state after every row (commit keeps the accepted one); the last row's becomes the next S0,
    // written in place element by element (element e of row L-1 reads only col[e])
    for (var t = 0u; t < L; t++) {
      let st = (c0 + t) * sFloats + sb;
      for (var e = 0u; e < P.Dk; e++) {
        var acc = vec2<f32>(0.0);
        for (var s = 0u; s <= t; s++) {
          let ks = (c0 + s) * 2u * kd + kd + hk * P.Dk;
          acc = ksum_add(acc, (qk[ks + e] * Pd[tri(t, s)]) * vn[s]);
        }
        let v = col[e] * eG[t] + ksum_value(acc);
        S_stage[st + e * P.Dv] = stored(v);
        if (t == L - 1u) { col[e] = v; }
      }
    }
  }
}
