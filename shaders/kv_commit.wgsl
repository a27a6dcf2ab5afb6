//#include "common.wgsl"
// Commits the first `rows` staged K/V rows of a step or verify block into a sliding layer's ring
// (src/model/gemma4/kv-cache.ts commit), in one dispatch instead of four buffer copies per row: copies end the
// compute pass, and a chain token made ~250 of them (about a fifth of its CPU time on the H200 host).
// Staged row t goes to slot (slot0 + t) mod slots; when `save_evicted` is 1, the entry the last row
// overwrites is first kept in k_evicted / v_evicted. Each invocation owns one element of one row, and
// reads its slot's old value before writing the new one, so no two invocations touch the same word.
// Values move as u32 bits: a copy, exactly like copyBufferToBuffer (NaN payloads included).
// Relaxed-math exactness: one stream. Copies only, no arithmetic.
override WG: u32 = 256u;

struct Params { rows: u32, row_floats: u32, slot0: u32, slots: u32, save_evicted: u32, _p0: u32, _p1: u32, _p2: u32 }

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read_write> k: array<u32>;
@group(0) @binding(2) var<storage, read_write> v: array<u32>;
@group(0) @binding(3) var<storage, read> k_stage: array<u32>;
@group(0) @binding(4) var<storage, read> v_stage: array<u32>;
@group(0) @binding(5) var<storage, read_write> k_evicted: array<u32>;
@group(0) @binding(6) var<storage, read_write> v_evicted: array<u32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let idx = linear_workgroup(wid, nwg) * WG + lid;
  let t = idx / P.row_floats;
  let e = idx % P.row_floats;
  if (t >= P.rows) { return; }
  let at = ((P.slot0 + t) % P.slots) * P.row_floats + e;
  if (P.save_evicted == 1u && t == P.rows - 1u) {
    k_evicted[e] = k[at];
    v_evicted[e] = v[at];
  }
  k[at] = k_stage[t * P.row_floats + e];
  v[at] = v_stage[t * P.row_floats + e];
}
