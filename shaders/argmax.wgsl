// Greedy argmax per row of logits [M, V]: the first index of the maximum (NaN never wins).
// One invocation per row, sequential scan: the result does not depend on M.
struct Params { M: u32, V: u32, _p0: u32, _p1: u32 }

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> ids: array<u32>;

@compute @workgroup_size(1)
fn main(@builtin(workgroup_id) wid: vec3<u32>) {
  let m = wid.x;
  if (m >= P.M) { return; }
  var best = 0u;
  var best_v = logits[m * P.V];
  for (var i = 1u; i < P.V; i++) {
    let v = logits[m * P.V + i];
    // NaN tests by bit pattern: compilers may assume x != x is false.
    let best_nan = (bitcast<u32>(best_v) & 0x7fffffffu) > 0x7f800000u;
    let v_nan = (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
    if ((v > best_v && !v_nan) || (best_nan && !v_nan)) { best = i; best_v = v; }
  }
  ids[m] = best;
}
