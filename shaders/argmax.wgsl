//#include "common.wgsl"
// Greedy argmax per row of logits [M, V]: the first index of the maximum, or NAN_ROW for a row that holds a NaN
// (src/model/nan-row.ts: no token can be chosen from such a row, and the host refuses it by name instead of
// emitting token 0 or a maximum over the remaining logits; a checkpoint with a NaN weight or a bad rms_norm_eps
// makes every row NaN, and a byte-equal NaN must not pass the block-versus-chain probe).
// Short rows (V <= P.span): `main`, one workgroup per row: invocation t scans indices t, t + WG, ...
// keeping the best (value, index), then a tree in workgroup memory merges the candidates.
// Long rows (a vocabulary of 262144 words): `parts` cuts each row into P.parts ranges of P.span indices,
// one workgroup each, and writes each range's best (value, index) to `cand`; `merge` (one workgroup
// per row) merges a row's candidates. On an H200 one workgroup per row took ~1 ms over 262144 logits
// (a fifth of a 2-layer 12B chain token's GPU time); a single invocation per row took 19 ms.
// Every path returns a function of the row alone, whatever the order of the merges: "larger value
// wins, equal values go to the smaller index" is a total order on the non-NaN candidates, and a NaN
// candidate (index NAN_ROW) beats every other, so any NaN in the row gives NAN_ROW. CPU twin:
// test/gpu/argmax.test.ts.
// Relaxed-math exactness: one stream. Comparisons only (no sum): each row's scan and merge are the same code at any M.
override WG: u32 = 256u;
struct Params { M: u32, V: u32, span: u32, parts: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> ids: array<u32>;
// parts / merge only: each range's best as (bits of the value, index), [M, P.parts].
@group(0) @binding(3) var<storage, read_write> cand: array<vec2<u32>>;

const NONE: u32 = 0xffffffffu;
const NAN_ROW: u32 = 0xfffffffeu; // src/model/nan-row.ts NAN_ROW_ID
var<workgroup> best_v: array<f32, WG>;
var<workgroup> best_i: array<u32, WG>;

// NaN by bit pattern: compilers may assume x != x is false.
fn is_nan(v: f32) -> bool { return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u; }
// Whether candidate (v, i) beats (bv, bi); i == NONE marks "no candidate yet" (an empty range), i == NAN_ROW a
// range that holds a NaN, which nothing beats and which beats everything else.
fn beats(v: f32, i: u32, bv: f32, bi: u32) -> bool {
  if (i == NONE || bi == NAN_ROW) { return false; }
  if (i == NAN_ROW || bi == NONE) { return true; }
  return v > bv || (v == bv && i < bi);
}

// The best of indices lo .. hi-1 of row m (NAN_ROW: one of them is NaN), scanned by the whole
// workgroup; the result is in best_v[0], best_i[0] for every invocation.
fn scan(m: u32, lo: u32, hi: u32, lid: u32) {
  var bv = 0.0;
  var bi = NONE;
  for (var i = lo + lid; i < hi; i += WG) {
    let v = logits[m * P.V + i];
    let c = select(i, NAN_ROW, is_nan(v));
    if (beats(v, c, bv, bi)) { bv = v; bi = c; }
  }
  merge_tree(bv, bi, lid);
}
// The workgroup's candidates merged by a tree in workgroup memory.
fn merge_tree(bv: f32, bi: u32, lid: u32) {
  best_v[lid] = bv;
  best_i[lid] = bi;
  for (var half = WG / 2u; half > 0u; half /= 2u) {
    workgroupBarrier();
    if (lid < half && beats(best_v[lid + half], best_i[lid + half], best_v[lid], best_i[lid])) {
      best_v[lid] = best_v[lid + half];
      best_i[lid] = best_i[lid + half];
    }
  }
  workgroupBarrier();
}
// NONE is left only by a row of no logits (V = 0, refused before any dispatch): index 0.
fn store(m: u32, lid: u32) {
  if (lid == 0u) { ids[m] = select(best_i[0], 0u, best_i[0] == NONE); }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let m = wid.x; // uniform: the whole workgroup returns or none of it
  if (m >= P.M) { return; }
  scan(m, 0u, P.V, lid);
  store(m, lid);
}

// Workgroup m * P.parts + p: the best of row m's range p.
@compute @workgroup_size(WG)
fn parts(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) lid: u32) {
  let w = linear_workgroup(wid, nwg); // uniform: the whole workgroup returns or none of it
  let p = w % P.parts;
  let m = w / P.parts;
  if (m >= P.M) { return; }
  let lo = p * P.span;
  scan(m, lo, min(P.V, lo + P.span), lid);
  if (lid == 0u) { cand[m * P.parts + p] = vec2<u32>(bitcast<u32>(best_v[0]), best_i[0]); }
}

// Workgroup m: the best of row m's P.parts candidates (P.parts <= WG).
@compute @workgroup_size(WG)
fn merge(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let m = wid.x;
  if (m >= P.M) { return; }
  var bv = 0.0;
  var bi = NONE;
  if (lid < P.parts) {
    let c = cand[m * P.parts + lid];
    bv = bitcast<f32>(c.x);
    bi = c.y;
  }
  merge_tree(bv, bi, lid);
  store(m, lid);
}
