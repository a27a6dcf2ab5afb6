// Where an affine (MLX-quantized) linear's packed weights and its groups' scales and biases lie in their
// buffers: one definition for every kernel that reads them (src/gpu/weight-layout.ts transposes them on
// upload; a GpuLinear's `layout` says which one it has, and ops.ts passes it as WT).
// WT = 0, MLX's layout: row n's 16-byte words k16 = 0 .. K16-1 at n * K16 + k16; group g's scale (bias) at
//   n * groups + g.
// WT = 1, k-major: the rows' 16-byte word k16 side by side, at k16 * rows + n; group g's scale at
//   g * rows + n. On a GPU, neighbouring invocations take neighbouring rows at the same k (and read the
//   same x): their weights are then one contiguous run instead of one 16-byte piece per row, which made
//   matmul_coop.wgsl's single rows 5-32% faster on an H200's 12B shapes (docs/PERFORMANCE.md, matvec).
// `rows` is the rows of the buffer (a part of a tensor split by rows is a tensor of its own). Which layout
// changes no arithmetic: only where a value is loaded from.
// Relaxed-math exactness: no arithmetic (index helpers).
override WT: u32 = 0u;

// Index of row n's 16-byte word k16 (array<vec4<u32>>), of K16 per row.
fn w16_index(n: u32, k16: u32, rows: u32, k16s: u32) -> u32 {
  if (WT == 1u) { return k16 * rows + n; }
  return n * k16s + k16;
}
// Index of row n's 32-bit word kw (array<u32>), of K32 per row (a multiple of 4).
fn w32_index(n: u32, kw: u32, rows: u32, k32s: u32) -> u32 {
  if (WT == 1u) { return ((kw >> 2u) * rows + n) * 4u + (kw & 3u); }
  return n * k32s + kw;
}
// Index of row n's group g's scale and bias (bf16 entries), of `groups` per row.
fn group_index(n: u32, g: u32, rows: u32, groups: u32) -> u32 {
  if (WT == 1u) { return g * rows + n; }
  return n * groups + g;
}
