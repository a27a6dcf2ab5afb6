//#include "common.wgsl"
// Attention of M query rows (positions p .. p+M-1) over one layer's cache, flash-decoding style, in
// four passes (on GPUs, two: seg_fused, below, does the first three in one workgroup per segment, with
// the same arithmetic). Row j reduces over its n = key_count(j) keys i = 0 .. n-1 (read through key_of),
// cut into nseg contiguous segments of L = ceil(n / nseg) keys (segment g: keys g L .. min(n, (g+1) L) - 1):
//   scores:      s[j, h, i] = q[j, h] . k[key(j, i)] and its compensation   (one invocation per score)
//   seg_softmax: m_g = max of segment g's scores; e_i = exp(s_i - m_g + c_i) written over s_i;
//                l_g = sum of its e_i                                        (one per (j, h, g))
//   seg_pv:      o_g = sum of its e_i v_i                                    (one per (j, h, g, 4 channels))
//   combine:     w_g = exp(m_g - max_g m_g); out = (sum_g w_g o_g) / (sum_g w_g l_g), g = 0 .. nseg-1
//                                                                            (one per (j, h, 4 channels))
// Which key the i-th term reads (`key_of`) is the whole difference between the cache layouts:
//   MODE_PHYSICAL: a sliding ring read in physical slot order 0..n-1, with no mask, exactly as classic
//     one-token decode reads it. Row j of a block sees the ring as it would be after writing block
//     tokens 0..j: slots those tokens overwrite are read from the staging rows instead.
//   MODE_CHRONO: the same window read in chronological order (prefill; the ring-chronological policy).
//   MODE_LINEAR: a full-attention cache, position = row, keys 0..p+j.
//   MODE_DRAFT: the MTP assistant's query-only read of a target ring: positions p - span .. p - 1
//     (p = the target's nextPos) in chronological order; position p - 1 - W (the entry the ring's
//     last write evicted, kept in the staging binding's row 0) when span = W + 1.
//   MODE_MASKED (inexact policy mask-widened): every row reads the whole buffered width, the union
//     of all rows' windows in chronological order, and keys outside its own window get an additive
//     -inf mask (score -1e30: they contribute exact zeros, but widen the reduction; a segment whose keys
//     are all masked gets weight exp(-1e30 - max) = 0).
// Exact by construction: a row's partition is a function of its key count n alone: nseg =
// min(P.seg_max, ceil(n / SEG_KEYS)) (exact plan), or nseg = P.split (inexact policies attention-m-split
// and mask-widened: the same code, another partition). n and the key order are all that a verify row
// shares with the chain step it stands for; M, the block's longest row and the row's index differ, so
// none of them may pick the partition. P.seg_max is a uniform, 64 for chain steps and verify blocks
// alike (prefill, which need not equal decode, passes 1 to keep its scratch small). Each segment is
// reduced sequentially in key order and the segments are combined sequentially in segment order, so a
// row's bits depend only on its keys and the order key_of visits them. P.key_stride and P.seg_stride
// (the dispatch's largest counts) only place values in memory. With nseg = 1, w_0 = exp(0) = 1 exactly
// and the result is bit for bit one sequential softmax and P.V over the row's keys.
// Dot products over head_dim are compensated (accuracy); sums over the key axis are plain f32, as in
// MLX, so that a different key order gives different bits.
// CPU twin: src/reference/gemma4/layer.ts attendRow (float64); test: test/gpu/kernels-attention.test.ts.
// Relaxed-math exactness: one stream. A decode row and each row of a verify block run the same entry points
// with the row, its position and key count as run-time values; the branches taken (`big`, staged keys) follow
// the key count and key locations, which are the same for a position either way.
override WG: u32 = 64u;

const MODE_PHYSICAL: u32 = 0u;
const MODE_CHRONO: u32 = 1u;
const MODE_LINEAR: u32 = 2u;
const MODE_MASKED: u32 = 3u;
const MODE_DRAFT: u32 = 4u;
const MASKED: f32 = -1.0e30;

// Keys per segment the exact plan aims at (before its cap P.seg_max).
const SEG_KEYS: u32 = 64u;

struct Params {
  M: u32, heads: u32, kv_heads: u32, d: u32,
  mode: u32, window: u32, base: u32, p: u32,
  key_stride: u32,  // score slots per (row, head) in s: at least every row's key count
  round: u32, span: u32,
  seg_max: u32,     // exact plan's cap on segments (64 for steps and verify blocks, 1 for prefill)
  split: u32,       // 0: exact plan; S > 0: exactly S segments (inexact policies)
  seg_stride: u32,  // segment slots per (row, head) in stats / partial: at least every row's nseg
  xs_group: u32,    // combine_fused: > 0 = then write the group sums of `out` (this group size) to xs_out
  _p1: u32,
}

@group(0) @binding(0) var<uniform> P: Params;
// q, K, V and out are read and written as vec4 (d % 4 == 0, checked when the config is read): on
// software adapters every load is a per-invocation loop, and one vec4 load costs about what one scalar
// load does. The arithmetic is unchanged: components are still reduced one at a time, in order.
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;       // [M, heads, d]
@group(0) @binding(2) var<storage, read> k_cache: array<vec4<f32>>; // [slots, kv_heads, d]
@group(0) @binding(3) var<storage, read> v_cache: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> k_stage: array<vec4<f32>>; // [M, kv_heads, d] this block's rows
@group(0) @binding(5) var<storage, read> v_stage: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> s: array<f32>; // [M, heads, key_stride] x 2 (score, compensation)
@group(0) @binding(7) var<storage, read_write> out: array<vec4<f32>>; // [M, heads, d]
@group(0) @binding(8) var<storage, read_write> stats: array<f32>; // [M, heads, seg_stride] x 2 (m_g, l_g)
@group(0) @binding(9) var<storage, read_write> partial: array<vec4<f32>>; // [M, heads, seg_stride, d] (o_g)

fn key_count(j: u32) -> u32 {
  let pos = P.p + j;
  if (P.mode == MODE_LINEAR) { return pos + 1u; }
  if (P.mode == MODE_MASKED) { return P.p + P.M - masked_lo(); }
  if (P.mode == MODE_DRAFT) { return min(P.p, P.span); }
  return min(pos + 1u, P.window);
}

// First position of the widened (masked) key range: the window start of row 0.
fn masked_lo() -> u32 {
  return select(0u, P.p + 1u - P.window, P.p + 1u > P.window);
}

fn is_masked(j: u32, i: u32) -> bool {
  if (P.mode != MODE_MASKED) { return false; }
  let kp = masked_lo() + i;
  let pos = P.p + j;
  return kp > pos || kp + P.window <= pos;
}

// Returns (from_stage, row): the cache slot or staging row that holds the i-th key of row j.
fn key_of(j: u32, i: u32) -> vec2<u32> {
  if (P.mode == MODE_LINEAR) { return vec2<u32>(0u, i); }
  let W = P.window;
  if (P.mode == MODE_PHYSICAL) {
    // Block token t (position p + t) is written to slot (p + t - base) mod W. (i + W - r < 2W: one
    // conditional subtraction instead of a modulo, which software adapters run per invocation.)
    let t0 = i + W - ((P.p - P.base) % W);
    let t = select(t0, t0 - W, t0 >= W);
    if (t <= j) { return vec2<u32>(1u, t); }
    return vec2<u32>(0u, i);
  }
  if (P.mode == MODE_DRAFT) {
    let kp = P.p - key_count(j) + i;
    if (kp + W + 1u == P.p) { return vec2<u32>(1u, 0u); }
    return vec2<u32>(0u, ring_slot(kp));
  }
  // MODE_CHRONO: positions lo .. p+j in order; MODE_MASKED: the widened range.
  let pos = P.p + j;
  let lo = select(pos + 1u - key_count(j), masked_lo(), P.mode == MODE_MASKED);
  let kp = lo + i;
  if (kp >= P.p) { return vec2<u32>(1u, kp - P.p); }
  return vec2<u32>(0u, ring_slot(kp));
}

// Physical slot of a position: (pos - base) mod W, computed without u32 wrap-around when pos < base
// (a 2^32 wrap is not a multiple of W unless W is a power of two).
fn ring_slot(pos: u32) -> u32 {
  return (pos % P.window + P.window - P.base % P.window) % P.window;
}

// Components c4*4 .. c4*4+3 of a key / value. (An if, not select(): select() evaluates both loads.)
fn v_at(loc: vec2<u32>, kvh: u32, c4: u32) -> vec4<f32> {
  let off = (loc.y * P.kv_heads + kvh) * (P.d / 4u) + c4;
  if (loc.x == 1u) { return v_stage[off]; }
  return v_cache[off];
}
// One compensated step per component, in order x, y, z, w.
fn ksum_add4(acc: vec2<f32>, p: vec4<f32>) -> vec2<f32> {
  return ksum_add(ksum_add(ksum_add(ksum_add(acc, p.x), p.y), p.z), p.w);
}
fn round4(v: vec4<f32>) -> vec4<f32> {
  if (P.round == 1u) { return vec4<f32>(round_bf16(v.x), round_bf16(v.y), round_bf16(v.z), round_bf16(v.w)); }
  return v;
}

// Score of key i of row j, head jh % heads, as (value, compensation): the compensated dot over head_dim,
// or (MASKED, 0) for a masked-out key. `loc` = key_of(j, i). `scores` uses it; seg_fused its batched twin score_fused.
fn score_of(j: u32, jh: u32, kvh: u32, i: u32, loc: vec2<u32>) -> vec2<f32> {
  if (is_masked(j, i)) { return vec2<f32>(MASKED, 0.0); }
  let d4 = P.d / 4u;
  let qb = jh * d4;
  let kb = (loc.y * P.kv_heads + kvh) * d4;
  var acc = vec2<f32>(0.0);
  // Over c in order, ONE loop whichever buffer holds the key: a row of a verify block reads its block's keys from
  // the staging rows where the chain step it stands for read them from the cache, and two loops (one per buffer)
  // are two copies of the arithmetic that a relaxed-math compiler may optimize apart (docs/NUMERICS.md).
  for (var c = 0u; c < d4; c++) {
    var kc: vec4<f32>;
    if (loc.x == 1u) { kc = k_stage[kb + c]; } else { kc = k_cache[kb + c]; }
    acc = ksum_add4(acc, q[qb + c] * kc);
  }
  // Keep the compensation term: scores are large (scale 1.0) and exp() amplifies their rounding.
  let t = ksum_value(acc);
  return vec2<f32>(t, (acc.x - t) + acc.y);
}

// score_of for seg_fused, the same arithmetic with its loads batched: KB consecutive vec4 of q and of
// the key are loaded into registers first, then reduced one component at a time in order c = 0 .. d4-1
// exactly as score_of does (the same expressions `q * k` and ksum_add4, in the same sequence), so the
// bits are score_of's. Why: in score_of each step's load waits on nothing but is issued only when the
// loop reaches it, so an invocation has about one load in flight; here it has 2 KB (constant-trip inner
// loops that the compiler unrolls into independent loads), which is what hides DRAM latency on a GPU
// where a decode step has too few invocations (one per key and head) to hide it by occupancy.
const KB: u32 = 8u;
fn score_fused(j: u32, jh: u32, kvh: u32, i: u32, loc: vec2<u32>) -> vec2<f32> {
  if (is_masked(j, i)) { return vec2<f32>(MASKED, 0.0); }
  let d4 = P.d / 4u;
  let qb = jh * d4;
  let kb = (loc.y * P.kv_heads + kvh) * d4;
  var acc = vec2<f32>(0.0);
  var qv: array<vec4<f32>, KB>;
  var kv: array<vec4<f32>, KB>;
  var c = 0u;
  for (; c + KB <= d4; c += KB) {
    for (var u = 0u; u < KB; u++) { qv[u] = q[qb + c + u]; }
    if (loc.x == 1u) {
      for (var u = 0u; u < KB; u++) { kv[u] = k_stage[kb + c + u]; }
    } else {
      for (var u = 0u; u < KB; u++) { kv[u] = k_cache[kb + c + u]; }
    }
    for (var u = 0u; u < KB; u++) { acc = ksum_add4(acc, qv[u] * kv[u]); }
  }
  // The rest (d4 not a multiple of KB), as score_of: one loop for both buffers.
  for (; c < d4; c++) {
    var kc: vec4<f32>;
    if (loc.x == 1u) { kc = k_stage[kb + c]; } else { kc = k_cache[kb + c]; }
    acc = ksum_add4(acc, q[qb + c] * kc);
  }
  let t = ksum_value(acc);
  return vec2<f32>(t, (acc.x - t) + acc.y);
}

@compute @workgroup_size(WG)
fn scores(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
  let idx = linear_workgroup(wid, nwg) * WG + lid;
  let i = idx % P.key_stride;
  let jh = idx / P.key_stride;
  if (jh >= P.M * P.heads) { return; }
  let j = jh / P.heads;
  let h = jh % P.heads;
  if (i >= key_count(j)) { return; }
  let at = 2u * (jh * P.key_stride + i);
  let sc = score_of(j, jh, h / (P.heads / P.kv_heads), i, key_of(j, i));
  s[at] = sc.x;
  s[at + 1u] = sc.y;
}

// Segments of a row with n keys: a function of n and uniforms only (see the header). At least one, so
// that a row without keys still writes its (NaN) output as the sequential kernel did.
fn seg_count(n: u32) -> u32 {
  if (P.split > 0u) { return P.split; }
  return max(1u, min(P.seg_max, (n + SEG_KEYS - 1u) / SEG_KEYS));
}

// Keys lo .. hi-1 of segment g of n keys (empty when g L >= n, possible only with an inexact split).
fn seg_range(n: u32, g: u32) -> vec2<u32> {
  let len = (n + seg_count(n) - 1u) / seg_count(n);
  let lo = min(n, g * len);
  return vec2<u32>(lo, min(n, lo + len));
}

@compute @workgroup_size(WG)
fn seg_softmax(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
  let idx = linear_workgroup(wid, nwg) * WG + lid;
  let g = idx % P.seg_stride;
  let jh = idx / P.seg_stride;
  if (jh >= P.M * P.heads) { return; }
  let n = key_count(jh / P.heads);
  if (g >= seg_count(n)) { return; }
  let r = seg_range(n, g);
  let b = jh * P.key_stride;
  // The maximum starts from the segment's first score (an empty segment keeps MASKED: weight 0).
  var mx = MASKED;
  if (r.x < r.y) { mx = s[2u * (b + r.x)]; }
  for (var i = r.x + 1u; i < r.y; i++) { mx = max(mx, s[2u * (b + i)]); }
  // A plain sequential f32 sum, as in MLX's kernels: the order in which the keys are visited matters,
  // which is why verify must visit them in classic's order.
  var sum = 0.0;
  for (var i = r.x; i < r.y; i++) {
    let at = 2u * (b + i);
    let e = exp_ref((s[at] - mx) + s[at + 1u]);
    s[at] = e;
    sum += e;
  }
  let sg = 2u * (jh * P.seg_stride + g);
  stats[sg] = mx;
  stats[sg + 1u] = sum;
}

@compute @workgroup_size(WG)
fn seg_pv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
  // One invocation per four consecutive channels c4*4 .. c4*4+3 of one segment (four independent
  // sums); a workgroup spans consecutive channels, so its V reads are contiguous.
  let idx = linear_workgroup(wid, nwg) * WG + lid;
  let d4 = P.d / 4u;
  let c4 = idx % d4;
  let g = (idx / d4) % P.seg_stride;
  let jh = idx / d4 / P.seg_stride;
  if (jh >= P.M * P.heads) { return; }
  let j = jh / P.heads;
  let n = key_count(j);
  if (g >= seg_count(n)) { return; }
  let kvh = (jh % P.heads) / (P.heads / P.kv_heads);
  let r = seg_range(n, g);
  let b = jh * P.key_stride;
  var acc = vec4<f32>(0.0);
  for (var i = r.x; i < r.y; i++) { acc += s[2u * (b + i)] * v_at(key_of(j, i), kvh, c4); }
  partial[(jh * P.seg_stride + g) * d4 + c4] = acc;
}

// ---- seg_fused: scores, seg_softmax and seg_pv of one segment in one workgroup ----------------------
// The same values, computed by the same expressions in the same order as the three passes above; only
// which invocation evaluates them and where the intermediates live differ:
//   1. invocation t computes the scores of keys lo + t, lo + t + WG, ... (score_of: one invocation per
//      key, since the compensated dot is one sequential chain that cannot be split without changing it);
//   2. invocation 0 takes the segment max in key order, as seg_softmax; every invocation then computes
//      e_i = exp_ref((s_i - m) + c_i) for its keys; their sum in key order is taken in step 3's loop;
//   3. invocation t sums e_i v_i over the segment's keys in order for channels 4t .. 4t+3, 4(t + WG) ..,
//      as seg_pv.
// Scores, e_i and key locations stay in workgroup memory when the segment has at most SEG_CAP keys
// (the exact plan's segments, up to 64 x SEG_CAP keys per row); longer segments (prefill's one
// segment, wide inexact splits) keep scores and e_i in `s`, as the four-pass path does, so a segment
// of any length works. Which storage a segment uses depends on its length alone (a function of the
// row's key count and the plan, never of M), so a verify row and the chain step it stands for take the
// same branch. This saves two dispatches per layer on GPUs, where each costs ~10-40 us whatever its
// size; attention-op.ts keeps the four passes on software adapters, where a barrier is a context switch.
// 64 invocations and 5 KiB of workgroup memory fit every adapter (SwiftShader: 256, 16 KiB). With
// HP = 2 (below) a workgroup takes two heads of one kv head: each step above runs for both, per head.
//
// Speed on a GPU (an H200: 132 SMs, DRAM latency ~0.6-1 us under load). Sliding attention at M = 1
// over 1024 slots, 16 q / 8 kv heads, d 256 reads 16.8 MB of K and V: at 0.25 x copy bandwidth that is
// ~18 us, about 1 TB/s, which by Little's law needs ~1 MB of loads in flight. The exact plan gives
// 16 segments x 16 heads = 256 workgroups of 64 (128 with head pairs), ~1-2 per SM: far too few
// warps to hide DRAM latency by occupancy, and the plan (64-key segments, a function of the key count
// shared with the software class) and the sequential compensated dot over d per key (the arithmetic
// the four-pass path and the tests fix) cannot be split further without changing bits. So the
// latency is hidden inside each invocation instead (instruction-level parallelism):
//   - score_of's loop issues one 16-byte K load per iteration and waits for it: 64 dependent DRAM round
//     trips per key; seg_pv does the same per key for V, and `combine` makes 2 nseg round
//     trips. At ~0.3-0.7 us each, that path runs at ~0.08 x copy bandwidth on a GPU.
//   - here each invocation issues KB (scores) or PB (P.V, max, sum, combine_fused) independent loads,
//     from constant-trip loops the compiler unrolls, and only then runs the same chain in the same
//     order on registers: 8 round trips per key instead of 64, in flight 128 B per invocation (one
//     full cache line of its K row: nothing fetched is wasted) and ~16 KiB per SM, ~2 MB on the chip.
//   - V loads are coalesced: for a key, the 64 invocations of step 3 read 64 consecutive vec4 (1 KiB).
//     A batch holding a staging row (at most M keys of a row) takes the per-key path; the test reads
//     workgroup memory, so the whole workgroup takes the same branch.
//   - the q heads of a kv head (GQA) run in one workgroup where they come in pairs (HP, below): each
//     K and V load serves both heads' chains, the pair shares its key locations, and its two chains
//     per key give an invocation twice the independent arithmetic.
// What bounds it, measured on an H200 with scripts/attention-microbench.ts (12B sliding layer, 1024 slots,
// the cache warm in L2 as the bench has it; docs/PERFORMANCE.md, attention): neither DRAM round trips (the
// cache sits in L2) nor step 3's loads, but a workgroup's serial path (a 256-step compensated chain per key,
// one invocation's max and sum, three barriers) and combine_fused, about half of whose ~4 us at M = 1 is
// the cost of a second dispatch (see combined). Each choice below was the fastest of those measured:
//   - head pairs in one workgroup (HP = 2) with K batches of 16 (KP): faster at every M than one workgroup
//     per head, and than a pair's heads on separate invocations (the second head's loads from L1);
//   - 64 keys per segment in workgroups of 64: more, shorter segments (more workgroups in flight, but more
//     segments to combine) and fewer, longer ones are both slower, with and without head pairs;
//   - loads issued batch by batch, as they are needed: a prefetch of a key's K and V lines before its chain,
//     step 3's V loads one batch ahead or its first batch before step 2, V batches of 16 (PB is 8), and K
//     one batch ahead with q from workgroup memory were each slower.
// Heads per seg_fused workgroup (attention-op.ts fusedHeads): 2 where the q heads of a kv head (GQA)
// come in pairs, else 1. A pair shares its segment's key locations, and every K and V load serves both
// heads; each head still runs its own chains in the order above (score_pair is score_fused for two
// heads, step 2 takes one invocation per head, step 3 two accumulators), so its bits are those of a
// workgroup of its own (test/gpu/kernels-attention.test.ts compares both with the four passes).
override HP: u32 = 1u;
const SEG_CAP: u32 = 256u;
var<workgroup> wg_s: array<f32, 2 * SEG_CAP>;   // score, then e_i; head slot hs at hs * SEG_CAP
var<workgroup> wg_c: array<f32, 2 * SEG_CAP>;   // score compensation
var<workgroup> wg_loc: array<u32, SEG_CAP>;     // key_of: row | from_stage << 31
var<workgroup> wg_mx: array<f32, 2>;

// Makes the previous step's writes (to `s` for a long segment, to workgroup memory otherwise) visible
// to the whole workgroup. `big` is uniform (the segment's length), as a barrier requires.
fn seg_sync(big: bool) {
  if (big) { storageBarrier(); } else { workgroupBarrier(); }
}
// Score (or, after step 2, e_i) of the segment's k-th key, key i = lo + k, of head slot hs, whose
// (j, h) starts at s offset b.
fn seg_score(big: bool, b: u32, i: u32, k: u32, hs: u32) -> f32 {
  if (big) { return s[2u * (b + i)]; }
  return wg_s[hs * SEG_CAP + k];
}

// Location of the segment's k-th key (key i = lo + k of row j): from workgroup memory when it is there.
fn seg_loc(big: bool, j: u32, i: u32, k: u32) -> vec2<u32> {
  if (big) { return key_of(j, i); }
  return vec2<u32>(wg_loc[k] >> 31u, wg_loc[k] & 0x7fffffffu);
}

// score_fused for heads jh and jh + 1 (HP = 2): each batch of the key loaded once, each head's chain
// score_fused's expressions in score_fused's order. Returns (score, compensation) of both. Batches of
// KP vec4 (the batch size changes no step of a chain). KP = 16 is faster than 8 for a pair on an H200 (12B
// sliding layer, 1024 slots; docs/PERFORMANCE.md, attention); a single head keeps KB = 8, as 16 made its
// verify blocks slower.
const KP: u32 = 16u;
fn score_pair(j: u32, jh: u32, kvh: u32, i: u32, loc: vec2<u32>) -> vec4<f32> {
  if (is_masked(j, i)) { return vec4<f32>(MASKED, 0.0, MASKED, 0.0); }
  let d4 = P.d / 4u;
  let qb0 = jh * d4;
  let qb1 = qb0 + d4;
  let kb = (loc.y * P.kv_heads + kvh) * d4;
  var acc0 = vec2<f32>(0.0);
  var acc1 = vec2<f32>(0.0);
  var q0: array<vec4<f32>, KP>;
  var q1: array<vec4<f32>, KP>;
  var kv: array<vec4<f32>, KP>;
  var c = 0u;
  for (; c + KP <= d4; c += KP) {
    for (var u = 0u; u < KP; u++) {
      q0[u] = q[qb0 + c + u];
      q1[u] = q[qb1 + c + u];
    }
    if (loc.x == 1u) {
      for (var u = 0u; u < KP; u++) { kv[u] = k_stage[kb + c + u]; }
    } else {
      for (var u = 0u; u < KP; u++) { kv[u] = k_cache[kb + c + u]; }
    }
    for (var u = 0u; u < KP; u++) { acc0 = ksum_add4(acc0, q0[u] * kv[u]); }
    for (var u = 0u; u < KP; u++) { acc1 = ksum_add4(acc1, q1[u] * kv[u]); }
  }
  for (; c < d4; c++) {
    var kc: vec4<f32>;
    if (loc.x == 1u) { kc = k_stage[kb + c]; } else { kc = k_cache[kb + c]; }
    acc0 = ksum_add4(acc0, q[qb0 + c] * kc);
    acc1 = ksum_add4(acc1, q[qb1 + c] * kc);
  }
  let t0 = ksum_value(acc0);
  let t1 = ksum_value(acc1);
  return vec4<f32>(t0, (acc0.x - t0) + acc0.y, t1, (acc1.x - t1) + acc1.y);
}

// Values per register batch in steps 2 and 3 (see score_fused, KB, for why batches).
const PB: u32 = 8u;

@compute @workgroup_size(WG)
fn seg_fused(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
  // One workgroup per (j, HP heads from h0, g); everything up to `big` is uniform, so whole workgroups
  // return. Head slot hs is head h0 + hs (its (j, h) index jh0 + hs).
  let wg = linear_workgroup(wid, nwg);
  let g = wg % P.seg_stride;
  let jh0 = (wg / P.seg_stride) * HP;
  if (jh0 >= P.M * P.heads) { return; }
  let j = jh0 / P.heads;
  let n = key_count(j);
  if (g >= seg_count(n)) { return; }
  let kvh = (jh0 % P.heads) / (P.heads / P.kv_heads);
  let r = seg_range(n, g);
  let len = r.y - r.x;
  let big = len > SEG_CAP;
  let b0 = jh0 * P.key_stride; // head slot hs's scores at b0 + hs * key_stride

  // 1. scores (as `scores`; score_fused is score_of with batched loads, score_pair two of them)
  for (var k = lid; k < len; k += WG) {
    let i = r.x + k;
    let loc = key_of(j, i);
    var sc = vec4<f32>(0.0);
    if (HP == 2u) {
      sc = score_pair(j, jh0, kvh, i, loc);
    } else {
      sc = vec4<f32>(score_fused(j, jh0, kvh, i, loc), 0.0, 0.0);
    }
    for (var hs = 0u; hs < HP; hs++) {
      let v = select(sc.xy, sc.zw, hs == 1u);
      if (big) {
        let at = 2u * (b0 + hs * P.key_stride + i);
        s[at] = v.x;
        s[at + 1u] = v.y;
      } else {
        wg_s[hs * SEG_CAP + k] = v.x;
        wg_c[hs * SEG_CAP + k] = v.y;
      }
    }
    if (!big) { wg_loc[k] = loc.y | (loc.x << 31u); }
  }
  seg_sync(big);

  // 2. max and e_i (as seg_softmax): each head's max in key order by invocation hs, PB values loaded
  // into registers ahead of each PB steps of the chain; their sum is taken in step 3.
  if (lid < HP) {
    let hs = lid;
    let b = b0 + hs * P.key_stride;
    var mx = MASKED;
    if (len > 0u) { mx = seg_score(big, b, r.x, 0u, hs); }
    var k = 1u;
    if (!big) {
      var sv: array<f32, PB>;
      for (; k + PB <= len; k += PB) {
        for (var u = 0u; u < PB; u++) { sv[u] = wg_s[hs * SEG_CAP + k + u]; }
        for (var u = 0u; u < PB; u++) { mx = max(mx, sv[u]); }
      }
    }
    for (; k < len; k++) { mx = max(mx, seg_score(big, b, r.x + k, k, hs)); }
    wg_mx[hs] = mx;
  }
  workgroupBarrier();
  if (big) { storageBarrier(); } // the max's reads of `s` before the e_i overwrite them
  for (var k = lid; k < len; k += WG) {
    let i = r.x + k;
    for (var hs = 0u; hs < HP; hs++) {
      let mx = wg_mx[hs];
      if (big) {
        let at = 2u * (b0 + hs * P.key_stride + i);
        s[at] = exp_ref((s[at] - mx) + s[at + 1u]);
      } else {
        let at = hs * SEG_CAP + k;
        wg_s[at] = exp_ref((wg_s[at] - mx) + wg_c[at]);
      }
    }
  }
  seg_sync(big);
  // 3. o_g (as seg_pv): for each key in order, acc += e_i * v_i, one accumulator per head; the PB
  // keys' values of a batch are loaded first (a warp's loads of one key are 32 consecutive vec4:
  // coalesced), then added in order.
  // Each head's sum of its e_i (seg_softmax's l_g) rides on this loop's loads of e_i: every invocation
  // adds them in key order in its first pass over the keys (the same values for all: one chain, starting
  // from 0.0 as seg_softmax's), and invocation 0 writes them, rather than a chain of its own between steps 2
  // and 3 that holds its warp back (slightly slower on an H200: docs/PERFORMANCE.md, attention).
  let d4 = P.d / 4u;
  let b1 = b0 + P.key_stride;
  var l0 = 0.0;
  var l1 = 0.0;
  for (var c4 = lid; c4 < d4; c4 += WG) {
    let first = c4 < WG; // the first pass (uniform: every invocation's first c4 is its lid)
    var acc0 = vec4<f32>(0.0);
    var acc1 = vec4<f32>(0.0);
    var k = 0u;
    var vv: array<vec4<f32>, PB>;
    var e0: array<f32, PB>;
    var e1: array<f32, PB>;
    // Batched: a batch whose keys all come from the cache (all but at most M keys of a row) loads
    // from v_cache without a branch per key; one holding a staging row loads key by key (v_at). The test reads
    // workgroup memory, the same for the whole workgroup, so it does not diverge.
    for (; !big && k + PB <= len; k += PB) {
      var stage = 0u;
      for (var u = 0u; u < PB; u++) { stage |= wg_loc[k + u]; }
      // Only the loads differ between the two kinds of batch; both then run the one arithmetic loop below. A
      // verify row's batch holds its block's staging rows where the chain step it stands for reads the cache, so
      // a copy of the arithmetic per kind of batch would be two copies a relaxed-math compiler may compile apart.
      if ((stage >> 31u) != 0u) {
        for (var u = 0u; u < PB; u++) {
          vv[u] = v_at(seg_loc(false, j, r.x + k + u, k + u), kvh, c4);
          e0[u] = wg_s[k + u];
          if (HP == 2u) { e1[u] = wg_s[SEG_CAP + k + u]; }
        }
      } else {
        for (var u = 0u; u < PB; u++) {
          vv[u] = v_cache[(wg_loc[k + u] * P.kv_heads + kvh) * d4 + c4];
          e0[u] = wg_s[k + u];
          if (HP == 2u) { e1[u] = wg_s[SEG_CAP + k + u]; }
        }
      }
      for (var u = 0u; u < PB; u++) { acc0 += e0[u] * vv[u]; }
      if (HP == 2u) {
        for (var u = 0u; u < PB; u++) { acc1 += e1[u] * vv[u]; }
      }
      if (first) {
        for (var u = 0u; u < PB; u++) { l0 += e0[u]; }
        if (HP == 2u) {
          for (var u = 0u; u < PB; u++) { l1 += e1[u]; }
        }
      }
    }
    for (; k < len; k++) {
      let i = r.x + k;
      let v = v_at(seg_loc(big, j, i, k), kvh, c4);
      let ek0 = seg_score(big, b0, i, k, 0u);
      acc0 += ek0 * v;
      if (first) { l0 += ek0; }
      if (HP == 2u) {
        let ek1 = seg_score(big, b1, i, k, 1u);
        acc1 += ek1 * v;
        if (first) { l1 += ek1; }
      }
    }
    partial[(jh0 * P.seg_stride + g) * d4 + c4] = acc0;
    if (HP == 2u) { partial[((jh0 + 1u) * P.seg_stride + g) * d4 + c4] = acc1; }
  }
  if (lid == 0u) {
    for (var hs = 0u; hs < HP; hs++) {
      let sg = 2u * ((jh0 + hs) * P.seg_stride + g);
      stats[sg] = wg_mx[hs];
      stats[sg + 1u] = select(l0, l1, hs == 1u);
    }
  }
}

@compute @workgroup_size(WG)
fn combine(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
  let idx = linear_workgroup(wid, nwg) * WG + lid;
  let d4 = P.d / 4u;
  let c4 = idx % d4;
  let jh = idx / d4;
  if (jh >= P.M * P.heads) { return; }
  let ns = seg_count(key_count(jh / P.heads));
  let sb = jh * P.seg_stride;
  var mx = stats[2u * sb];
  for (var g = 1u; g < ns; g++) { mx = max(mx, stats[2u * (sb + g)]); }
  // Segment 0 starts the sums (w * x, not 0 + w * x): with one segment, w = 1 and l, o are that
  // segment's own sums, bit for bit (a -0.0 channel included).
  var w = exp_ref(stats[2u * sb] - mx);
  var l = w * stats[2u * sb + 1u];
  var o = w * partial[sb * d4 + c4];
  for (var g = 1u; g < ns; g++) {
    w = exp_ref(stats[2u * (sb + g)] - mx);
    l += w * stats[2u * (sb + g) + 1u];
    o += w * partial[(sb + g) * d4 + c4];
  }
  out[jh * d4 + c4] = round4(o / l);
}

// combine for the fused path: the same arithmetic as `combine` (the same expressions in segment order),
// with the stats and partials of CB segments loaded into registers before their steps of the chain, so
// that an invocation waits for one batch of loads (every row of up to CB + 1 segments: 1088 keys)
// instead of 2 nseg loads one after the other; the first batch's loads serve both the max and the sums.
// With xs_group > 0 it then writes the group sums o_proj's exact kernels read (o_sums): one dispatch
// fewer per layer (classic decode of a 12B on an H200 is bound by the CPU recording its dispatches).
@group(0) @binding(10) var<storage, read_write> xs_out: array<f32>; // [M, heads * d / xs_group]
// The workgroup's outputs, for o_sums (the values written to `out`, without reading them back).
var<workgroup> wg_out: array<vec4<f32>, WG>;

@compute @workgroup_size(WG)
fn combine_fused(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
  let wg = linear_workgroup(wid, nwg);
  let idx = wg * WG + lid; // = jh * d4 + c4, the output vec4
  let d4 = P.d / 4u;
  var v = vec4<f32>(0.0);
  if (idx / d4 < P.M * P.heads) {
    v = round4(combined(idx / d4, idx % d4, d4));
    out[idx] = v;
  }
  if (P.xs_group > 0u) {
    wg_out[lid] = v;
    workgroupBarrier();
    o_sums(wg, lid);
  }
}

// Segments per register batch of combined.
const CB: u32 = 16u;

// A batch's stats and partials: segments first .. first + CB - 1 of output vec4 c4, loaded at once (past the
// row's last segment, the last one's again). One helper for combined's two loads of a batch (before the max
// and in the sums), as fast on an H200 as two inlined copies.
struct Batch { m: array<f32, CB>, l: array<f32, CB>, o: array<vec4<f32>, CB> }
fn load_batch(first: u32, last: u32, c4: u32, d4: u32) -> Batch {
  var b: Batch;
  for (var u = 0u; u < CB; u++) {
    let sg = min(first + u, last);
    b.m[u] = stats[2u * sg];
    b.l[u] = stats[2u * sg + 1u];
    b.o[u] = partial[sg * d4 + c4];
  }
  return b;
}

// Output vec4 c4 of (row, head) jh over its segments. The loads of a batch are not behind `g < ns`
// branches: a segment past the row's last loads the last one's values again (never used), so the
// batch's loads go out together; each weight w = exp_ref(m - mx) is computed branch-free (exp_ref_sel)
// before the sums take them in order, so the batch's exps overlap. The sums' steps and their order are
// those of `combine`. Why: on an H200 (scripts/attention-microbench.ts --alone, 12B sliding layer, M = 1,
// 16 segments; docs/PERFORMANCE.md, attention) each load and exp behind its own branch made combine_fused
// take ~2.4 times what a dispatch that loads one partial and writes it takes, and unbranched loads and
// exps together ~1.9 times (the exps alone unbranched, the loads still behind branches, gain nothing).
// o_sums costs nothing measurable.
fn combined(jh: u32, c4: u32, d4: u32) -> vec4<f32> {
  let ns = seg_count(key_count(jh / P.heads));
  let sb = jh * P.seg_stride;
  let last = sb + ns - 1u;
  // Segments 1 .. CB: their stats serve the max, and the first round of the sums.
  var bt = load_batch(sb + 1u, last, c4, d4);
  let m0 = stats[2u * sb];
  var mx = m0;
  for (var u = 0u; u < CB; u++) { mx = select(mx, max(mx, bt.m[u]), 1u + u < ns); }
  // Longer rows: the max over the other segments, CB at a time, in order.
  var tv: array<f32, CB>;
  for (var g = 1u + CB; g < ns; g += CB) {
    for (var u = 0u; u < CB; u++) { tv[u] = stats[2u * min(sb + g + u, last)]; }
    for (var u = 0u; u < CB; u++) { mx = select(mx, max(mx, tv[u]), g + u < ns); }
  }
  // Segment 0 starts the sums (w * x, not 0 + w * x): with one segment, w = 1 and l, o are that
  // segment's own sums, bit for bit (a -0.0 channel included).
  let w0 = exp_ref(m0 - mx);
  var l = w0 * stats[2u * sb + 1u];
  var o = w0 * partial[sb * d4 + c4];
  var wv: array<f32, CB>;
  for (var g = 1u; g < ns; g += CB) {
    if (g > 1u) { bt = load_batch(sb + g, last, c4, d4); }
    for (var u = 0u; u < CB; u++) { wv[u] = exp_ref_sel(bt.m[u] - mx); }
    for (var u = 0u; u < CB; u++) {
      if (g + u < ns) {
        l += wv[u] * bt.l[u];
        o += wv[u] * bt.o[u];
      }
    }
  }
  return o / l;
}

// The group sums of the 4 WG output values workgroup wg just wrote (held in wg_out), as matmul.wgsl
// affine_xsum computes them (one compensated sum per group, its values in order; batched loads change no
// step): invocation i sums the workgroup's i-th group. ops.attention asks for them only where groups tile
// the workgroup's values (4 WG a multiple of xs_group, a row of heads * d values a multiple of it), so no
// group spans two.
fn o_sums(wg: u32, lid: u32) {
  let per = P.xs_group / 4u; // vec4s per group, a multiple of PB (xs_group % 32 == 0)
  let first = lid * per; // within the workgroup
  if (lid >= WG / per || wg * WG + first >= P.M * P.heads * (P.d / 4u)) { return; }
  var sx = vec2<f32>(0.0);
  var xv: array<vec4<f32>, PB>;
  for (var e = 0u; e < per; e += PB) {
    for (var u = 0u; u < PB; u++) { xv[u] = wg_out[first + e + u]; }
    for (var u = 0u; u < PB; u++) {
      sx = ksum_add(ksum_add(ksum_add(ksum_add(sx, xv[u].x), xv[u].y), xv[u].z), xv[u].w);
    }
  }
  xs_out[(wg * WG + first) * 4u / P.xs_group] = ksum_value(sx);
}
