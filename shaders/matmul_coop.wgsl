//#include "common.wgsl"
// affine_coop: the exact quantized matvec for GPUs (ops.matmul picks it on hardware adapters for
// decode steps and verify blocks; software adapters keep matmul_lanes.wgsl, see src/gpu/kernel-class.ts).
// y[m, n] = sum_k x[m, k] * W[n, k] for affine 4-bit and 8-bit weights with group_size 32 or 64.
//
// Why this shape (measured on an H200 with microbenchmarks of the access pattern and arithmetic):
// - A workgroup of WG invocations covers R * F output features, F = WG / T; the T invocations of a
//   feature split its quantization groups (slice t takes groups t, t + T, ...). Invocation lid =
//   t * F + f: neighbouring invocations take neighbouring features at the same slice, so the x values a
//   subgroup loads are one or two addresses (a broadcast). Each invocation reads whole groups (16 to
//   64 bytes); this pattern alone streams at about 0.95 x copy bandwidth. On GPUs the weights are
//   uploaded k-major (affine_layout.wgsl, WT = 1), so that the neighbouring features' 16-byte words a
//   subgroup loads lie side by side instead of a row apart (the narrow linears 10-30% faster). (Giving
//   neighbouring invocations neighbouring words of ONE feature instead makes their x loads 128 to
//   256 bytes apart, and x traffic through L1 then bounds the kernel at 0.13 x copy.)
// - With the arithmetic, delivering x is the bottleneck (H200, LM head shape: the loads of weights alone
//   stream at 0.93 x copy, weights and x at 0.45-0.6 x), so an invocation serves R features (slot j:
//   feature n + j F) from each x load. ops.coopFeatures picks R from the linear's shape (1, 2 or 4):
//   more features per invocation means fewer workgroups, which narrow linears cannot afford. A pass
//   over the weights serves at most two slots (SLOTS): passes of several rows hold every row's sums
//   of each slot in registers, so R = 4 takes two passes (slots 0, 1, then 2, 3), which share each
//   chunk of x staged for a verify block (staged_passes); a single row of R = 4 takes all four slots in
//   one loop (row_slots).
// - A group's weights are loaded and unpacked ONCE for all the rows of the block (up to ROWS per
//   pass): a verify block of K rows reads and unpacks the weights once, not K times.
// - Single rows load the next group's words before the current group's arithmetic (software
//   pipelining): a decode step's row in one loop over its slots (row_slots: gate_up's both matrices, R = 4's
//   four slots, R = 1's one), whose sums are local values; single rows of R = 2, and one left over from a
//   block, in pass_rows. Their H200 measurements are noted where they are; none changes an operation.
// - WG is 256, or 512 for the MLP's 4-bit linears (ops.coopWorkgroup); the NVIDIA driver gives
//   this kernel 128 registers at both sizes (16 warps an SM). A single row's time steps with the waves of
//   workgroups over the H200's SMs (docs/PERFORMANCE.md, matvec: what bounds a single row).
//
// Exactness by construction: the arithmetic of output (m, n) is a fixed sequence that depends only on
// x[m, :], W[n, :], K, group_size, T and R:
//   1. per group g: four position sums a_j (j = the weight's place within its half word, see
//      `nibbles`), each a chain of fma over the group's words in order; D = (a_0 + a_1 / 16) +
//      (a_2 / 256 + a_3 / 4096) (8-bit: (a_0 + a_2) + (a_1 + a_3) / 256); then the Neumaier steps
//      scale * D and bias' * sx (sx = the group's compensated x sum from matmul.wgsl affine_xsum) into
//      invocation t's partial (s, c), groups in increasing order;
//   2. the T partials of (m, n) are added by ONE invocation in the fixed order t = 0 .. T-1 (a
//      Neumaier sum of the s parts, the c parts summed in the same order and added last).
// T and R are properties of the linear, never of M. Each row of a pass and each feature slot has its
// own accumulators, and every row and slot runs the same operations on them; a feature's slot depends
// on n only. No reduction order is left to the driver (no subgroup or atomic reductions). Rows past
// ROWS take another pass over the weights with the same code.
//
// The arithmetic per weight is one logic op (mask the code in place and OR the bits of 2^23: one LOP3
// on NVIDIA), one exact subtract (2^23 and the centring offset) and one fma. A code left in place at
// bit 4j is worth q * 16^j: the 16^j is a power of two, so a_j / 16^j is exactly the sum shifted codes
// would give, and the shifts cost nothing.
// CPU twin: src/reference/quantized-matmul.ts (float64); test: test/gpu/kernels-matmul.test.ts.
// Relaxed-math exactness: pinned. A decode row (row_slots, gate_up_row) and a verify block (the passes) are
// separate copies of the group arithmetic; every value whose order matters goes through pin() (an XOR with the
// uniform zero P._zero) or ksum_add_pinned, so a compiler cannot regroup or fuse one copy and not the other.
//#include "matmul_affine_io.wgsl"
//#include "matmul_affine_dot.wgsl"
@group(0) @binding(6) var<storage, read> xs: array<f32>;     // [M, groups] from matmul.wgsl affine_xsum
@group(0) @binding(7) var<storage, read> x4: array<vec4<f32>>;
@group(0) @binding(8) var<storage, read> w4: array<vec4<u32>>;
// A second matrix's weights, scales and biases: gate_up's up projection (w4, scales, biases hold the
// gate's); `main` finds its own matrix here again (ops.matmul binds it twice), for row_slots.
@group(0) @binding(9) var<storage, read> w4u: array<vec4<u32>>;
@group(0) @binding(10) var<storage, read> scales_u: array<u32>;
@group(0) @binding(11) var<storage, read> biases_u: array<u32>;

// Invocations per output feature, and output features per invocation (ops.matmul: functions of the
// linear's shape, never of M).
override T: u32 = 16u;
override R: u32 = 1u; // 1, 2 or 4 (gate_up: 1 or 2)
// Feature slots one pass over the weights serves (see the header).
override SLOTS: u32 = min(R, 2u);
// Weights per quantization group (32 or 64) and the 16-byte words that hold them (1, 2 or 4).
override GS: u32 = 64u;
override WORDS: u32 = GS * BITS / 128u;
// Rows of x one pass over the weights serves.
const ROWS: u32 = 4u;

// The workgroup's shared memory (16 KiB at WG 256, WebGPU's default limit; 32 KiB at 512), used twice per pass:
// - while the pass runs, the x of its rows for a chunk of groups, staged once for all invocations
//   (row r's vec4 k of the chunk at r * (chunk groups) * GS / 4 + k): on an H200, loading x was what
//   bound the kernel, and every invocation loading its own copy made a verify block of 4 rows cost
//   2.7 x one row;
// - at its end, the invocations' partials (s, c) of row m, both feature slots: shared4[m * WG + lid]
//   = (slot 0's s, c, slot 1's s, c).
// Its size is the partials' (4 * WG vec4s; ops.coopWorkgroup asks for WG 512 only where the device allows
// 32 KiB); a pass stages chunks of x as large as that.
override SHARED_VEC4: u32 = max(1024u, 4u * WG);
var<workgroup> shared4: array<vec4<f32>, SHARED_VEC4>;

// Per row of the pass, the current group's position sums of one feature, and an invocation's partial
// (s, c). Structs with a member per row, never indexed by a variable, so they stay in registers.
struct Sums { r0: vec4<f32>, r1: vec4<f32>, r2: vec4<f32>, r3: vec4<f32> }
struct Partials { r0: vec2<f32>, r1: vec2<f32>, r2: vec2<f32>, r3: vec2<f32> }
var<private> sa: Sums;     // feature n
var<private> sb: Sums;     // feature n + F (two slots)
var<private> pa: Partials;
var<private> pb: Partials;
// The current 32-bit word of each feature, unpacked (4-bit: low and high half; 8-bit: lo only).
var<private> wa_lo: vec4<f32>;
var<private> wa_hi: vec4<f32>;
var<private> wb_lo: vec4<f32>;
var<private> wb_hi: vec4<f32>;

// Feature n's 16-byte word i of group g, and its group g's scale and bias, in the linear's layout (WT).
fn widx(n: u32, g: u32, i: u32) -> u32 { return w16_index(n, g * WORDS + i, P.N, (P.K / GS) * WORDS); }
fn gidx(n: u32, g: u32) -> u32 { return group_index(n, g, P.N, P.K / GS); }
const MAGIC: u32 = 0x4B000000u; // the bits of 2^23
// Codes 0..3 of a half word h (4-bit: bits 0-15) left in place, centred: (q_j - 8) * 16^j exactly.
// (h & mask) | MAGIC is 2^23 + q_j * 16^j (below 2^23, so exact); the subtraction removes 2^23 and
// the centring offset 8 * 16^j in one exact step.
fn nibbles(h: u32) -> vec4<f32> {
  let bits = (vec4<u32>(h) & vec4<u32>(0xFu, 0xF0u, 0xF00u, 0xF000u)) | vec4<u32>(MAGIC);
  return bitcast<vec4<f32>>(bits) - vec4<f32>(8388616.0, 8388736.0, 8390656.0, 8421376.0);
}
// The four 8-bit codes of word w as (q_0 - 128, (q_1 - 128) * 256, q_2 - 128, (q_3 - 128) * 256).
fn bytes8(w: u32) -> vec4<f32> {
  let bits = (vec4<u32>(w, w, w >> 16u, w >> 16u) & vec4<u32>(0xFFu, 0xFF00u, 0xFFu, 0xFF00u)) | vec4<u32>(MAGIC);
  return bitcast<vec4<f32>>(bits) - vec4<f32>(8388736.0, 8421376.0, 8388736.0, 8421376.0);
}
// D of one row: the position sums scaled back (powers of two: exact) and added in a fixed order.
fn group_dot(a: vec4<f32>) -> f32 {
  if (BITS == 4u) { return pin(a.x + a.y * 0.0625) + pin(a.z * 0.00390625 + a.w * 0.000244140625); }
  return pin(a.x + a.z) + pin(a.y + a.w) * 0.00390625;
}
// v, opaque to the compiler (P._zero is 0, a uniform it cannot know): no sum is regrouped and no product fused
// across a pin. A decode row (row_slots) and a verify block (the passes) are separate copies of this arithmetic, so
// every value whose order matters is pinned, and both copies round the same operations whatever the compiler does.
fn pin(v: f32) -> f32 { return bitcast<f32>(bitcast<u32>(v) ^ P._zero); }
// ksum_add (common.wgsl) pinned: the caller's product is not fused into the sum, t is opaque (the compensation
// (s.x - t) + v cannot be simplified to 0), and each compensation is added on its own.
fn ksum_add_pinned(s: vec2<f32>, v0: f32) -> vec2<f32> {
  let v = pin(v0);
  let t = pin(s.x + v);
  let c = select(pin(v - t) + s.x, pin(s.x - t) + v, abs(s.x) >= abs(v));
  return vec2<f32>(t, pin(s.y + c));
}

// Whether a pass reads x from shared memory (staged per chunk) or straight from the x buffer. Measured
// on an H200 (12B shapes; docs/PERFORMANCE.md, matvec): staging makes 4-bit verify blocks 1.2-1.4 x faster
// (M = 2..8) but single rows slower (their x loads are already one broadcast per subgroup; the down
// projection's by more than half), and 8-bit blocks of 4 or more rows 1.3 x slower (half the x loads per weight of
// 4-bit, and a barrier per round of groups). Where x comes from changes no arithmetic: the bytes are the same.
// A function of the pipeline constant BITS, not an override of its own, so that no host can set it apart from
// BITS (run_pass relies on it: see there).
fn stage_blocks() -> bool { return BITS == 4u; }
fn stage_x(rows: u32) -> bool { return stage_blocks() && rows > 1u; }
// x vec4 xi: staged (an index into shared4) or not (an index into x4).
fn x_at(xi: u32, staged: bool) -> vec4<f32> {
  if (staged) { return shared4[xi]; }
  return x4[xi];
}

// One row's x (vec4 index xi) times the current words, into that row's sums of both features.
fn add_row(a: ptr<private, vec4<f32>>, b: ptr<private, vec4<f32>>, xi: u32, staged: bool) {
  let x0 = x_at(xi, staged);
  var x1 = x0;
  if (BITS == 4u) { x1 = x_at(xi + 1u, staged); }
  fma_word(a, wa_lo, wa_hi, x0, x1);
  if (SLOTS == 2u) { fma_word(b, wb_lo, wb_hi, x0, x1); }
}
// One 32-bit word of each feature (4-bit: 8 weights, staged x vec4s xi and xi + 1; 8-bit: 4 weights,
// x vec4 xi; row r's at xi + r * xrow), unpacked once, into every row's sums.
fn add_word(wa: u32, wb: u32, xi: u32, xrow: u32, rows: u32, staged: bool) {
  unpack_word(wa, &wa_lo, &wa_hi);
  if (SLOTS == 2u) { unpack_word(wb, &wb_lo, &wb_hi); }
  add_row(&sa.r0, &sb.r0, xi, staged);
  if (rows > 1u) { add_row(&sa.r1, &sb.r1, xi + xrow, staged); }
  if (rows > 2u) { add_row(&sa.r2, &sb.r2, xi + 2u * xrow, staged); }
  if (rows > 3u) { add_row(&sa.r3, &sb.r3, xi + 3u * xrow, staged); }
}
// A 32-bit word of codes as floats: 4-bit: its low half word (codes_lo) and its high one (codes_hi); 8-bit:
// codes_lo only.
fn codes_lo(w: u32) -> vec4<f32> {
  if (BITS == 4u) { return nibbles(w); }
  return bytes8(w);
}
fn codes_hi(w: u32) -> vec4<f32> { return nibbles(w >> 16u); }
fn unpack_word(w: u32, lo: ptr<private, vec4<f32>>, hi: ptr<private, vec4<f32>>) {
  *lo = codes_lo(w);
  if (BITS == 4u) { *hi = codes_hi(w); }
}
// One row's sums a plus its x times one unpacked word (4-bit: x0 with lo, then x1 with hi; 8-bit: x0 with lo).
fn word_fma(a: vec4<f32>, lo: vec4<f32>, hi: vec4<f32>, x0: vec4<f32>, x1: vec4<f32>) -> vec4<f32> {
  if (BITS == 4u) { return fma(x1, hi, fma(x0, lo, a)); }
  return fma(x0, lo, a);
}
fn fma_word(a: ptr<private, vec4<f32>>, lo: vec4<f32>, hi: vec4<f32>, x0: vec4<f32>, x1: vec4<f32>) {
  *a = word_fma(*a, lo, hi, x0, x1);
}

// The end of a group for one row and feature: the Neumaier steps scale * D and bias' * sx into partial p
// (sb: the group's scale and bias', group_scale_bias).
fn group_closed(p: vec2<f32>, s: vec4<f32>, sb: vec2<f32>, sx: f32) -> vec2<f32> {
  return ksum_add_pinned(ksum_add_pinned(p, sb.x * group_dot(s)), sb.y * sx);
}
fn close_row(p: ptr<private, vec2<f32>>, s: vec4<f32>, sb: vec2<f32>, sx: f32) { *p = group_closed(*p, s, sb, sx); }

// One packed 16-byte word of matrix `which` (0: w4, 1: w4u; a uniform branch).
fn word(which: u32, i: u32) -> vec4<u32> {
  if (which == 1u) { return w4u[i]; }
  return w4[i];
}
fn scale_of(which: u32, i: u32) -> f32 {
  if (which == 1u) { return bf16_to_f32(u16_at(scales_u[i >> 1u], i)); }
  return scale_at(i);
}
fn bias_of(which: u32, i: u32) -> f32 {
  if (which == 1u) { return bf16_to_f32(u16_at(biases_u[i >> 1u], i)); }
  return bias_at(i);
}
// Group gi's scale and bias' = bias + scale * half_code (what multiplies its x sum) of matrix `which`.
fn group_scale_bias(which: u32, gi: u32) -> vec2<f32> {
  let scale = scale_of(which, gi);
  return vec2<f32>(scale, bias_of(which, gi) + scale * half_code());
}

// One pass of matrix `which` over rows r0 .. r0+rows-1 for features na (and nb with two slots), x read
// straight from the x buffer (!stage_x(rows): single rows, 8-bit blocks); then invocation t < SLOTS * rows
// returns the total of row t / SLOTS of the pass's slot t % SLOTS (the other invocations return 0).
fn pass_rows(which: u32, f: u32, t: u32, lid: u32, na: u32, nb: u32, r0: u32, rows: u32) -> f32 {
  let groups = P.K / GS;
  let gv = GS / 4u; // x vec4s per group
  let xw = 8u / BITS; // x vec4s per 32-bit word of weights: 2 (4-bit) or 1 (8-bit)
  pa = Partials();
  pb = Partials();
  let xrow = P.x_stride / 4u;
  if (SLOTS == 1u) {
    // Software pipelining: group g + T's words are loaded before group g's arithmetic, so that an
    // invocation has two groups' loads in flight. Measured on an H200 (12B, cold weights; docs/PERFORMANCE.md,
    // matvec): the down matvec at M = 1 1.19 x faster; with R = 2 (two features' words, twice the registers)
    // the LM head and 8-bit gate/up were 4-20% slower, so two slots keep one group at a time. Two groups in
    // flight with their own sums (more independent chains per invocation) are slower still, and loading two
    // groups ahead instead of one gains nothing.
    var next = group_words(which, t, na, groups);
    for (var g = t; g < groups; g += T) {
      let cur = next;
      if (g + T < groups) { next = group_words(which, g + T, na, groups); }
      pass_group_words(which, g, cur, r0 * xrow + g * gv, xrow, r0, rows, na, nb, groups, xw);
    }
    return pass_total(f, t, lid, rows, 1u);
  }
  for (var g = t; g < groups; g += T) {
    pass_group(which, g, r0 * xrow + g * gv, xrow, r0, rows, na, nb, groups, xw, false);
  }
  return pass_total(f, t, lid, rows, 1u);
}

// The slots (features a, b) of matrix `which` that one pass over the weights serves.
struct Pair { which: u32, a: u32, b: u32 }

// The partials of a second pair, for staged_passes. swap_partials exchanges them with pa, pb, so that
// pass_group and pass_total serve either pair (in SSA form a swap is a renaming, which a compiler
// resolves without copies; the speed measured is under staged_passes).
var<private> pa1: Partials;
var<private> pb1: Partials;
fn swap_partials() {
  let ta = pa;
  let tb = pb;
  pa = pa1;
  pb = pb1;
  pa1 = ta;
  pb1 = tb;
}

// The passes of a block of rows r0 .. r0+rows-1 with x staged (stage_x(rows)): pair p0 and, when `two`,
// pair p1 (R = 4's slots 2 and 3, or gate_up's up projection), chunk by chunk of groups, each chunk's x
// staged in shared memory ONCE for both pairs. Returns each pair's total as pass_rows does (.x: p0,
// .y: p1). Every (row, feature) runs pass_group's operations in pass_group's order: the pairs interleave
// per group, their sums and partials are their own.
// Measured on an H200 (12B, cold weights; docs/PERFORMANCE.md, matvec): staging each chunk once for both
// pairs instead of once per pair (a sweep of the chunks per pair) makes 4-bit blocks faster by 8-12% and
// the LM head's by 15%, single rows unchanged. Slower, and so not done: loading a chunk's words before
// staging its x (with two pairs 24-32% slower, and single rows 18-37%: registers), and all four slots in
// one sweep at 2 or 4 rows (each staged x load serving four features instead of two).
fn staged_passes(fs: Features, lid: u32, p0: Pair, p1: Pair, two: bool, r0: u32, rows: u32) -> vec2<f32> {
  let groups = P.K / GS;
  let gv = GS / 4u; // x vec4s per group
  let xw = 8u / BITS; // x vec4s per 32-bit word of weights: 2 (4-bit) or 1 (8-bit)
  pa = Partials();
  pb = Partials();
  pa1 = Partials();
  pb1 = Partials();
  // Groups per chunk: the most whole rounds of T groups whose x for every row fits shared memory
  // (ops.coopThreads keeps T * GS <= 1024, so a chunk holds at least one round at 4 rows).
  // Measured on an H200 and slower (docs/PERFORMANCE.md, matvec): loading the next group's words ahead here,
  // and 48 KiB chunks. Both slowed single rows as well, which never run this code: one pipeline serves every
  // M, so the registers and workgroup memory of this path set the occupancy of row_slots too. Double
  // buffering through registers (each invocation loads its share of the next chunk's x while this one is
  // computed) helps the down projection's blocks but slows the 4-bit gate/up projection, the fused gate_up
  // and single rows of R = 4 (the registers again). 32 KiB of staged x (SHARED_VEC4 2048, which also allows
  // T = 32 for blocks) slows every shape, single rows too. 8 KiB with passes of 2 rows (ROWS 2) makes blocks
  // of 2 faster but blocks of 4 slower (two passes over the weights): verify blocks are of 4 rows by
  // default, so 16 KiB stays.
  let cg = SHARED_VEC4 / (rows * gv) / T * T;
  let xrow = cg * gv; // staged vec4s between rows
  for (var c0 = 0u; c0 < groups; c0 += cg) {
    let span = min(cg, groups - c0) * gv; // vec4s of one row in this chunk
    for (var i = lid; i < rows * span; i += WG) {
      let r = i / span;
      let k = i - r * span;
      shared4[r * xrow + k] = x4[(r0 + r) * (P.x_stride / 4u) + c0 * gv + k];
    }
    workgroupBarrier();
    for (var g = c0 + fs.t; g < min(c0 + cg, groups); g += T) {
      pass_group(p0.which, g, (g - c0) * gv, xrow, r0, rows, p0.a, p0.b, groups, xw, true);
      if (two) {
        swap_partials();
        pass_group(p1.which, g, (g - c0) * gv, xrow, r0, rows, p1.a, p1.b, groups, xw, true);
        swap_partials();
      }
    }
    workgroupBarrier(); // the next chunk (or the partials) overwrite shared4
  }
  let v0 = pass_total(fs.f, fs.t, lid, rows, 1u);
  var v1 = 0.0;
  if (two) {
    swap_partials();
    v1 = pass_total(fs.f, fs.t, lid, rows, 1u);
  }
  return vec2<f32>(v0, v1);
}

// Group g of every row of the pass into its sums, then into the partials (x0: the staged x vec4 of
// the group's first weight in the pass's first row).
fn pass_group(which: u32, g: u32, x0: u32, xrow: u32, r0: u32, rows: u32, na: u32, nb: u32, groups: u32, xw: u32,
              staged: bool) {
  sa = Sums();
  sb = Sums();
  for (var i = 0u; i < WORDS; i++) {
    let qa = word(which, widx(na, g, i));
    var qb = qa;
    if (SLOTS == 2u) { qb = word(which, widx(nb, g, i)); }
    add_words(qa, qb, x0 + 4u * xw * i, xw, xrow, rows, staged);
  }
  close_group(which, g, r0, rows, na, nb, groups);
}

// The four 32-bit words of a 16-byte word of each feature into every row's sums (x vec4 xi: the first).
fn add_words(qa: vec4<u32>, qb: vec4<u32>, xi: u32, xw: u32, xrow: u32, rows: u32, staged: bool) {
  add_word(qa.x, qb.x, xi, xrow, rows, staged);
  add_word(qa.y, qb.y, xi + xw, xrow, rows, staged);
  add_word(qa.z, qb.z, xi + 2u * xw, xrow, rows, staged);
  add_word(qa.w, qb.w, xi + 3u * xw, xrow, rows, staged);
}

// The up to four 16-byte words of group g of feature n (WORDS of them are loaded). Named members, never
// indexed by a variable, so that they stay in registers.
struct Words { w0: vec4<u32>, w1: vec4<u32>, w2: vec4<u32>, w3: vec4<u32> }
fn group_words(which: u32, g: u32, n: u32, groups: u32) -> Words {
  var q: Words;
  if (g >= groups) { return q; }
  q.w0 = word(which, widx(n, g, 0u));
  if (WORDS > 1u) { q.w1 = word(which, widx(n, g, 1u)); }
  if (WORDS > 2u) { q.w2 = word(which, widx(n, g, 2u)); }
  if (WORDS > 3u) { q.w3 = word(which, widx(n, g, 3u)); }
  return q;
}

// pass_group of one feature (R = 1, x not staged) with the group's words loaded ahead: the same
// operations in the same order.
fn pass_group_words(which: u32, g: u32, q: Words, x0: u32, xrow: u32, r0: u32, rows: u32, na: u32, nb: u32,
                    groups: u32, xw: u32) {
  sa = Sums();
  sb = Sums();
  add_words(q.w0, q.w0, x0, xw, xrow, rows, false);
  if (WORDS > 1u) { add_words(q.w1, q.w1, x0 + 4u * xw, xw, xrow, rows, false); }
  if (WORDS > 2u) { add_words(q.w2, q.w2, x0 + 8u * xw, xw, xrow, rows, false); }
  if (WORDS > 3u) { add_words(q.w3, q.w3, x0 + 12u * xw, xw, xrow, rows, false); }
  close_group(which, g, r0, rows, na, nb, groups);
}

// The end of group g for every row and feature of the pass: its sums into the partials.
fn close_group(which: u32, g: u32, r0: u32, rows: u32, na: u32, nb: u32, groups: u32) {
  let sba = group_scale_bias(which, gidx(na, g));
  var sbb = vec2<f32>(0.0);
  if (SLOTS == 2u) { sbb = group_scale_bias(which, gidx(nb, g)); }
  let xsr = r0 * groups + g; // this group's x sum in row r0
  close_row(&pa.r0, sa.r0, sba, xs[xsr]);
  if (SLOTS == 2u) { close_row(&pb.r0, sb.r0, sbb, xs[xsr]); }
  if (rows > 1u) {
    close_row(&pa.r1, sa.r1, sba, xs[xsr + groups]);
    if (SLOTS == 2u) { close_row(&pb.r1, sb.r1, sbb, xs[xsr + groups]); }
  }
  if (rows > 2u) {
    close_row(&pa.r2, sa.r2, sba, xs[xsr + 2u * groups]);
    if (SLOTS == 2u) { close_row(&pb.r2, sb.r2, sbb, xs[xsr + 2u * groups]); }
  }
  if (rows > 3u) {
    close_row(&pa.r3, sa.r3, sba, xs[xsr + 3u * groups]);
    if (SLOTS == 2u) { close_row(&pb.r3, sb.r3, sbb, xs[xsr + 3u * groups]); }
  }
}

// The partials of every invocation into shared memory; invocation t < SLOTS * rows of feature f then
// returns the total of row t / SLOTS, slot t % SLOTS of the pass over the T partials, in order (the
// others return 0).
// tl: the lane layout of the pass (see `features`).
fn pass_total(f: u32, t: u32, lid: u32, rows: u32, tl: u32) -> f32 {
  shared4[lid] = vec4<f32>(pa.r0, pb.r0);
  if (rows > 1u) { shared4[WG + lid] = vec4<f32>(pa.r1, pb.r1); }
  if (rows > 2u) { shared4[2u * WG + lid] = vec4<f32>(pa.r2, pb.r2); }
  if (rows > 3u) { shared4[3u * WG + lid] = vec4<f32>(pa.r3, pb.r3); }
  workgroupBarrier();
  var v = 0.0;
  if (t < SLOTS * rows) {
    let m = t / SLOTS;
    let slot = t % SLOTS;
    var s = vec2<f32>(0.0);
    var c = 0.0;
    for (var i = 0u; i < T; i++) {
      let p4 = shared4[m * WG + lane_of(i, f, tl)];
      let q = select(p4.xy, p4.zw, slot == 1u);
      s = ksum_add_pinned(s, q.x);
      c = pin(c + q.y);
    }
    v = s.x + pin(s.y + c);
  }
  workgroupBarrier(); // shared4 is reused by the next pass
  return v;
}

fn rnd(v: f32) -> f32 { return select(v, round_bf16(v), P.round == 1u); }

// Invocation lid's features (slot j: feature base + j F + f; `feature`) and its slice t.
// The lane layout tl: neighbouring invocations take tl consecutive slices of one feature, then the next
// feature: lid = ((t / tl) * F + f) * tl + t % tl. tl = 1 (a subgroup's x loads are one or two
// addresses) everywhere but the single-row loop of gate_up and of R = 4 (ROW_TL, below). Which invocation
// computes what changes no arithmetic: a partial's slice t and the fixed order t = 0 .. T-1 of its sum do
// not move.
struct Features { base: u32, f: u32, t: u32, tl: u32 }
fn features(wid: vec3<u32>, nwg: vec3<u32>, lid: u32, tl: u32) -> Features {
  let F = WG / T;
  let f = (lid / tl) % F;
  return Features(linear_workgroup(wid, nwg) * R * F, f, (lid / (tl * F)) * tl + lid % tl, tl);
}
// Slot j's feature, and the one whose row it computes (features past N compute a valid row and are
// not stored).
fn feature(fs: Features, j: u32) -> u32 { return fs.base + j * (WG / T) + fs.f; }
fn row_of(fs: Features, j: u32) -> u32 { return min(feature(fs, j), P.N - 1u); }
fn lane_of(t: u32, f: u32, tl: u32) -> u32 { return ((t / tl) * (WG / T) + f) * tl + t % tl; }
// Where invocation t's total of a pass over slots h, h + 1 goes: slot h + t % SLOTS, row r0 + t / SLOTS.
fn out_index(fs: Features, h: u32, r0: u32, rows: u32) -> u32 {
  let n = feature(fs, h + fs.t % SLOTS);
  if (fs.t >= SLOTS * rows || n >= P.N) { return 0xFFFFFFFFu; }
  return y_index(r0 + fs.t / SLOTS, n);
}

// A stacked linear (ops.stackedQkvMatmul: an attention block's q, k and v projections stacked by rows in
// one matrix, run as one dispatch) writes its features in SEGMENTS segments: q's (the first y_stride
// features) as any linear, rows y_stride apart; then k's and v's (of equal widths; with two segments, k's
// alone) each as its own [M, width] block, starting at the next multiple of 64 floats after the previous
// block (so that each block can be bound at a 256-byte offset). Where a feature's value goes changes
// nothing in how it is computed: a stacked linear's features have the bytes of the separate linears'
// (test/gpu/stacked-qkv.test.ts). Other linears keep SEGMENTS = 1, which removes the segments' code from
// their pipelines (llvmpipe compiles this shader for minutes: every branch left in costs CI time), and
// the segments' widths come from the parameters, so that every geometry shares two more pipelines at most.
override SEGMENTS: u32 = 1u;
fn block_end(start: u32, floats: u32) -> u32 { return (start + floats + 63u) / 64u * 64u; }
fn y_index(m: u32, n: u32) -> u32 {
  if (SEGMENTS == 1u || n < P.y_stride) { return m * P.y_stride + P.n_offset + n; }
  let seg1 = P.y_stride;
  let seg2 = select(P.N, seg1 + (P.N - seg1) / 2u, SEGMENTS == 3u);
  let base1 = block_end(0u, P.M * seg1);
  if (n < seg2) { return base1 + m * (seg2 - seg1) + (n - seg1); }
  let base2 = block_end(base1, P.M * (seg2 - seg1));
  return base2 + m * (P.N - seg2) + (n - seg2);
}

// pass_rows for a pass whose x is not staged (stage_x): a single row (M = 1 of R = 2, the stacked q, k, v; one
// left over from a block, M = 5 or 13) or a block of 8-bit rows. A single row gets the constant 1, so that the
// compiler's copy of pass_rows for it drops the other rows' code: on an H200 that ran a chain step's matvec
// 1.3-1.4 x faster (the guards of the other rows and their registers cost that much). Both copies run the same
// operations for a row, in the same order; the row-invariance tests hold them to the same bytes
// (test/gpu/kernels-matmul.test.ts).
// The conditions are constants of the pipeline where they can be (stage_blocks(): a 4-bit pass that is not
// staged is a single row; `single`: whether the caller passes single rows at all), so that a pipeline holds
// no copy that no dispatch reaches. Why: llvmpipe compiles this shader for tens of seconds per pipeline
// (cold), and such copies would be a third to half of that time (docs/PERFORMANCE.md, pipeline compiles).
// The same bytes, and on an H200 the same speed. Leaving out the single-row copy as well (a 4-bit row left
// over from a block staged, or taken by row_slots) compiles faster still but makes main's blocks 5-8%
// slower on an H200.
fn run_pass(which: u32, fs: Features, lid: u32, na: u32, nb: u32, r0: u32, rows: u32, single: bool) -> f32 {
  if (stage_blocks() || (single && rows == 1u)) { return pass_rows(which, fs.f, fs.t, lid, na, nb, r0, 1u); }
  return pass_rows(which, fs.f, fs.t, lid, na, nb, r0, rows);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let fs = features(wid, nwg, lid, 1u);
  if (P.M == 1u && R != 2u) {
    // A decode step: every slot in one loop (R = 4: four slots; R = 1: one). Invocation t < SLOTS holds the
    // totals of slots t (.x) and t + 2 (.y). (A single row left over from a block, M = 5 or 13, takes the
    // passes below: the same bytes. Through row_slots in the loop below instead, or staged, every block of
    // main's is 5-8% slower on an H200.)
    // R = 2 (a layer's stacked q, k, v) keeps the passes: through row_slots its single row is no faster on
    // an H200.
    let fs1 = features(wid, nwg, lid, select(1u, ROW_TL, R == 4u));
    let four = R == 4u;
    let v = row_slots(fs1, lid, 0u, Slots(row_of(fs1, 0u), row_of(fs1, 1u), row_of(fs1, 2u), row_of(fs1, 3u)), four);
    let o = out_index(fs1, 0u, 0u, 1u);
    if (o != 0xFFFFFFFFu) { y[o] = rnd(v.x); }
    if (four) {
      let o2 = out_index(fs1, 2u, 0u, 1u);
      if (o2 != 0xFFFFFFFFu) { y[o2] = rnd(v.y); }
    }
    return;
  }
  for (var r0 = 0u; r0 < P.M; r0 += ROWS) {
    let rows = min(ROWS, P.M - r0);
    if (stage_x(rows)) {
      // Every slot in one sweep of the staged chunks (R = 4: two pairs, slots 0, 1 and 2, 3).
      let v = staged_passes(fs, lid, Pair(0u, row_of(fs, 0u), row_of(fs, 1u)),
                            Pair(0u, row_of(fs, 2u), row_of(fs, 3u)), R == 4u, r0, rows);
      let o = out_index(fs, 0u, r0, rows);
      if (o != 0xFFFFFFFFu) { y[o] = rnd(v.x); }
      if (R == 4u) {
        let o2 = out_index(fs, 2u, r0, rows);
        if (o2 != 0xFFFFFFFFu) { y[o2] = rnd(v.y); }
      }
      continue;
    }
    for (var h = 0u; h < R; h += SLOTS) {
      let v = run_pass(0u, fs, lid, row_of(fs, h), row_of(fs, h + 1u), r0, rows, true);
      let o = out_index(fs, h, r0, rows);
      if (o != 0xFFFFFFFFu) { y[o] = rnd(v); }
    }
  }
}

// A single row's feature slots in ONE loop over the groups, so that each x load serves all of them and
// an invocation has their words in flight: slots a, b (features n.a, n.b) of the matrix at bindings 8, 4, 5
// and, with `four`, slots c, d (n.c, n.d) of the one at 9-11; b and d only with two slots per pass (R >= 2).
// gate_up passes (gate n, gate n + F, up n, up n + F) in the lane layout ROW_TL; `main` with R = 4 passes
// (n, n + F, n + 2F, n + 3F) in ROW_TL, its own matrix being bound at 9-11 too (ops.matmul), and with R = 1
// its one slot in the layout tl = 1. Invocation t < SLOTS returns the totals of slots a|b (t = 0|1) and c|d
// (0 without `four`). The same operations per feature, in the
// same order, as run_pass (which rows > 1 take): the same bytes (test/gpu/fused-ops.test.ts,
// test/gpu/kernels-matmul.test.ts). Measured on an H200 (12B, cold weights, M = 1; docs/PERFORMANCE.md,
// matvec), against R = 2 through run_pass: gate_up 1.15-1.2 x faster, and with R = 4 (`main`) the LM head and
// the 8-bit gate/up projection 1.2 x (the same at M = 4 and 8). The passes keep tl = 1: ROW_TL made them
// slower.
// Its sums and partials are local values, not the private globals of the passes, and a group's words are
// loaded one group ahead (WORDS <= 2: 4-bit groups of 32 or 64, 8-bit of 32): on an H200
// (`scripts/coop-microbench.ts --cold 256`, M = 1) faster than the private globals with or without the words
// ahead, and than local values without them; x staged in workgroup memory with a vec4 of padding per group
// (conflict-free for the four slices) is no faster. Without any loads this loop's arithmetic alone takes
// more than half of the 4-bit gate/up projection's time.
// One-feature linears (R = 1: the down projection, o_proj) take this loop too, in the layout tl = 1: a little
// faster on an H200 than the passes (pass_rows, private globals, the words a group ahead); ROW_TL made them
// slower.
// With the k-major weight layout (WT = 1, affine_layout.wgsl) ROW_TL is 1: neighbouring invocations then read
// neighbouring 16-byte words, where in a layout of 4 they would read four groups of one feature again (slower
// on an H200's 12B shapes).
override ROW_TL: u32 = 4u - 3u * WT; // divides T (8 or 16: ops.setCoopThreads)
// One 32-bit word of codes times x (4-bit: x0 with its low half word, x1 with its high one), into sums a.
fn word_sums(a: vec4<f32>, w: u32, x0: vec4<f32>, x1: vec4<f32>) -> vec4<f32> {
  return word_fma(a, codes_lo(w), codes_hi(w), x0, x1);
}
// A 16-byte word of codes (x vec4 xi: its first 32-bit word's) into sums a: add_words' order.
fn quad_sums(a: vec4<f32>, q: vec4<u32>, xi: u32, xw: u32) -> vec4<f32> {
  let x1 = xw / 2u; // 4-bit: the second x vec4 of a 32-bit word (8-bit reads one: x1 unused)
  var s = word_sums(a, q.x, x4[xi], x4[xi + x1]);
  s = word_sums(s, q.y, x4[xi + xw], x4[xi + xw + x1]);
  s = word_sums(s, q.z, x4[xi + 2u * xw], x4[xi + 2u * xw + x1]);
  return word_sums(s, q.w, x4[xi + 3u * xw], x4[xi + 3u * xw + x1]);
}
// The four slots' features: a, b of the matrix at bindings 8, 4, 5; c, d of the one at 9-11. Slot b and d
// exist with two slots per pass (SLOTS = 2), c and d with `four` (a uniform value apart from them: the
// totals' barriers depend on it).
struct Slots { a: u32, b: u32, c: u32, d: u32 }
// The words of group g of the four slots (zero past the groups, and for slots that do not exist). One bounds
// check for all, the loads in the order a, c, then b, d: through group_words per slot (a check each) the LM head
// is 6% slower at M = 1 on an H200, the other shapes the same.
struct SlotWords { a: Words, b: Words, c: Words, d: Words }
fn slot_words(g: u32, groups: u32, n: Slots, four: bool) -> SlotWords {
  var q: SlotWords;
  if (g >= groups) { return q; }
  q.a.w0 = w4[widx(n.a, g, 0u)];
  if (four) { q.c.w0 = w4u[widx(n.c, g, 0u)]; }
  if (WORDS > 1u) {
    q.a.w1 = w4[widx(n.a, g, 1u)];
    if (four) { q.c.w1 = w4u[widx(n.c, g, 1u)]; }
  }
  if (SLOTS == 2u) {
    q.b.w0 = w4[widx(n.b, g, 0u)];
    if (four) { q.d.w0 = w4u[widx(n.d, g, 0u)]; }
    if (WORDS > 1u) {
      q.b.w1 = w4[widx(n.b, g, 1u)];
      if (four) { q.d.w1 = w4u[widx(n.d, g, 1u)]; }
    }
  }
  if (WORDS > 2u) {
    q.a.w2 = w4[widx(n.a, g, 2u)];
    q.a.w3 = w4[widx(n.a, g, 3u)];
    if (four) { q.c.w2 = w4u[widx(n.c, g, 2u)]; q.c.w3 = w4u[widx(n.c, g, 3u)]; }
    if (SLOTS == 2u) {
      q.b.w2 = w4[widx(n.b, g, 2u)];
      q.b.w3 = w4[widx(n.b, g, 3u)];
      if (four) { q.d.w2 = w4u[widx(n.d, g, 2u)]; q.d.w3 = w4u[widx(n.d, g, 3u)]; }
    }
  }
  return q;
}
// The partials of the four slots.
struct SlotPartials { a: vec2<f32>, b: vec2<f32>, c: vec2<f32>, d: vec2<f32> }
// The position sums of the four slots.
struct SlotSums { a: vec4<f32>, b: vec4<f32>, c: vec4<f32>, d: vec4<f32> }
// The i-th 16-byte word of each slot (qa .. qd; x vec4 xi: its first weight's) into the slots' sums, slot
// by slot within the word (a, c, b, d): each x load serves every slot at once. Each slot's whole group in turn
// (the same operations per slot) is 6-26% slower on an H200 (M = 1).
fn slot_quads(s: SlotSums, qa: vec4<u32>, qb: vec4<u32>, qc: vec4<u32>, qd: vec4<u32>, xi: u32, four: bool)
    -> SlotSums {
  let xw = 8u / BITS;
  var r = s;
  r.a = quad_sums(s.a, qa, xi, xw);
  if (four) { r.c = quad_sums(s.c, qc, xi, xw); }
  if (SLOTS == 2u) {
    r.b = quad_sums(s.b, qb, xi, xw);
    if (four) { r.d = quad_sums(s.d, qd, xi, xw); }
  }
  return r;
}
// Group g of the slots, whose words are q, into their partials (x vec4 xb: the row's first; sx: its x sum).
fn slot_group(p: SlotPartials, q: SlotWords, g: u32, groups: u32, xb: u32, sx: f32, n: Slots, four: bool)
    -> SlotPartials {
  let xw = 8u / BITS;
  let xi = xb + g * (GS / 4u);
  var s = slot_quads(SlotSums(), q.a.w0, q.b.w0, q.c.w0, q.d.w0, xi, four);
  if (WORDS > 1u) { s = slot_quads(s, q.a.w1, q.b.w1, q.c.w1, q.d.w1, xi + 4u * xw, four); }
  if (WORDS > 2u) { s = slot_quads(s, q.a.w2, q.b.w2, q.c.w2, q.d.w2, xi + 8u * xw, four); }
  if (WORDS > 3u) { s = slot_quads(s, q.a.w3, q.b.w3, q.c.w3, q.d.w3, xi + 12u * xw, four); }
  var r = p;
  r.a = group_closed(p.a, s.a, group_scale_bias(0u, gidx(n.a, g)), sx);
  if (four) { r.c = group_closed(p.c, s.c, group_scale_bias(1u, gidx(n.c, g)), sx); }
  if (SLOTS == 2u) {
    r.b = group_closed(p.b, s.b, group_scale_bias(0u, gidx(n.b, g)), sx);
    if (four) { r.d = group_closed(p.d, s.d, group_scale_bias(1u, gidx(n.d, g)), sx); }
  }
  return r;
}
fn row_slots(fs: Features, lid: u32, r0: u32, n: Slots, four: bool) -> vec2<f32> {
  let groups = P.K / GS;
  let xb = r0 * (P.x_stride / 4u);
  var p = SlotPartials();
  if (WORDS > 2u) {
    // 8-bit groups of 64: their four words a group, loaded in it (ahead, 64 more registers: 29.0 us for the
    // 8-bit gate/up projection at M = 1 where this loop takes 26.4).
    for (var g = fs.t; g < groups; g += T) {
      p = slot_group(p, slot_words(g, groups, n, four), g, groups, xb, xs[r0 * groups + g], n, four);
    }
  } else {
    var next = slot_words(fs.t, groups, n, four);
    for (var g = fs.t; g < groups; g += T) {
      let q = next;
      next = slot_words(g + T, groups, n, four);
      p = slot_group(p, q, g, groups, xb, xs[r0 * groups + g], n, four);
    }
  }
  pa = Partials();
  pb = Partials();
  pa.r0 = p.a;
  pb.r0 = p.b;
  let ab = pass_total(fs.f, fs.t, lid, 1u, fs.tl);
  if (!four) { return vec2<f32>(ab, 0.0); }
  pa.r0 = p.c;
  pb.r0 = p.d;
  return vec2<f32>(ab, pass_total(fs.f, fs.t, lid, 1u, fs.tl));
}

// gate_up: the MLP's gate and up projections of the same x and GeGLU in one dispatch (GPUs, where a
// dispatch costs more than this arithmetic): y[m, n] = r(r(gelu_tanh(g)) * u) with g, u the two
// matmul outputs exactly as `main` computes them (and rounds them) and the GeGLU of elementwise.wgsl.
@compute @workgroup_size(WG)
fn gate_up(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
  gate_up_rows(wid, nwg, lid);
}

// gate_up_sums: gate_up, then the group sums of its output that the down projection reads (xs_out[m, g],
// the compensated sum of y[m, :] over group g of SUMS_GROUP features, in feature order: matmul.wgsl
// affine_xsum's steps, the same bytes; test/gpu/fused-ops.test.ts). A workgroup's features are R * WG / T
// consecutive ones (see `features`), so it sums the groups that lie within them, once its outputs are
// written (ops.gateUp fuses the sums only where that is a whole number of groups, and where the stage
// takes this tenth storage binding). Why: the sums were a dispatch of their own per layer (an H200 spends
// ~1.7 us of GPU time on a dispatch besides its work, and the host ~8 us recording it).
override SUMS_GROUP: u32 = 64u;
@group(0) @binding(12) var<storage, read_write> xs_out: array<f32>;
const SUMS_BATCH: u32 = 16u; // y values loaded ahead of their steps of a sum (as affine_xsum's XB)
@compute @workgroup_size(WG)
fn gate_up_sums(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
  gate_up_rows(wid, nwg, lid);
  storageBarrier(); // the workgroup's outputs, written by all its invocations, are read across them
  let base = linear_workgroup(wid, nwg) * R * (WG / T); // the workgroup's first feature in this part
  let per = R * (WG / T) / SUMS_GROUP; // groups per workgroup
  let row_groups = P.y_stride / SUMS_GROUP;
  for (var i = lid; i < P.M * per; i += WG) {
    let m = i / per;
    let n0 = base + (i % per) * SUMS_GROUP;
    if (n0 >= P.N) { continue; }
    let k0 = m * P.y_stride + P.n_offset + n0;
    var sx = vec2<f32>(0.0);
    var yv: array<f32, SUMS_BATCH>;
    for (var e = 0u; e < SUMS_GROUP; e += SUMS_BATCH) { // SUMS_GROUP: 32 or 64, whole batches
      for (var u = 0u; u < SUMS_BATCH; u++) { yv[u] = y[k0 + e + u]; }
      for (var u = 0u; u < SUMS_BATCH; u++) { sx = ksum_add(sx, yv[u]); }
    }
    xs_out[m * row_groups + (P.n_offset + n0) / SUMS_GROUP] = ksum_value(sx);
  }
}

// gate_up's work: every row's outputs into y.
fn gate_up_rows(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) {
  let fs = features(wid, nwg, lid, 1u);
  let fs1 = features(wid, nwg, lid, ROW_TL); // single rows: row_slots' lane layout
  let na = row_of(fs, 0u);
  let nb = row_of(fs, 1u);
  for (var r0 = 0u; r0 < P.M; r0 += ROWS) {
    let rows = min(ROWS, P.M - r0);
    var g = 0.0;
    var u = 0.0;
    var o = 0u;
    if (rows == 1u) {
      let n0 = row_of(fs1, 0u);
      let n1 = row_of(fs1, 1u);
      let gu = row_slots(fs1, lid, r0, Slots(n0, n1, n0, n1), true);
      g = rnd(gu.x);
      u = rnd(gu.y);
      o = out_index(fs1, 0u, r0, 1u);
    } else if (stage_blocks()) { // stage_x(rows): rows > 1 here
      let gu = staged_passes(fs, lid, Pair(0u, na, nb), Pair(1u, na, nb), true, r0, rows);
      g = rnd(gu.x);
      u = rnd(gu.y);
    } else {
      g = rnd(run_pass(0u, fs, lid, na, nb, r0, rows, false));
      u = rnd(run_pass(1u, fs, lid, na, nb, r0, rows, false));
    }
    if (rows > 1u) { o = out_index(fs, 0u, r0, rows); }
    // one GeGLU for every row (a copy per path would be two copies of its arithmetic)
    if (o != 0xFFFFFFFFu) { y[o] = rnd(rnd(gelu_tanh(g)) * u); }
  }
}
