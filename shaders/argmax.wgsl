// Greedy argmax per row of logits [M, V]: the first index of the maximum (NaN never wins).
// One workgroup per row: invocation t scans indices t, t + WG, t + 2 WG, ... keeping the best (value,
// index), then a tree in workgroup memory merges the candidates. The result is a function of the row
// alone, whatever the order of the merges: "larger value wins, equal values go to the smaller index"
// is a total order on the non-NaN candidates, and NaN is never a candidate. (A single invocation per
// row took 19 ms over a 262144-word vocabulary on an H200.)
override WG: u32 = 256u;
struct Params { M: u32, V: u32, _p0: u32, _p1: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> ids: array<u32>;

const NONE: u32 = 0xffffffffu;
var<workgroup> best_v: array<f32, WG>;
var<workgroup> best_i: array<u32, WG>;

// NaN by bit pattern: compilers may assume x != x is false.
fn is_nan(v: f32) -> bool { return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u; }
// Whether candidate (v, i) beats (bv, bi); i == NONE marks "no candidate yet" (an all-NaN range).
fn beats(v: f32, i: u32, bv: f32, bi: u32) -> bool {
  if (i == NONE) { return false; }
  if (bi == NONE) { return true; }
  return v > bv || (v == bv && i < bi);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let m = wid.x; // uniform: the whole workgroup returns or none of it
  if (m >= P.M) { return; }
  var bv = 0.0;
  var bi = NONE;
  for (var i = lid; i < P.V; i += WG) {
    let v = logits[m * P.V + i];
    if (!is_nan(v) && beats(v, i, bv, bi)) { bv = v; bi = i; }
  }
  best_v[lid] = bv;
  best_i[lid] = bi;
  for (var half = WG / 2u; half > 0u; half /= 2u) {
    workgroupBarrier();
    if (lid < half && beats(best_v[lid + half], best_i[lid + half], best_v[lid], best_i[lid])) {
      best_v[lid] = best_v[lid + half];
      best_i[lid] = best_i[lid + half];
    }
  }
  // Every logit NaN: index 0, as the sequential scan this replaces returned.
  if (lid == 0u) { ids[m] = select(best_i[0], 0u, best_i[0] == NONE); }
}
