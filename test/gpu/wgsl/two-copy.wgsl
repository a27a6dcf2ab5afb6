// A deliberately two-copy kernel for the compiler fuzzer's test (test/gpu/wgsl-fuzz.test.ts): y[m] is the dot
// product of row m of x with w, and row 0 computes it in a copy of its own, written out again, the same text as
// the one every other row runs. Compiled strictly both copies give the same bytes; a relaxed-math compiler may
// contract or regroup each copy differently, and so does the fuzzer. `one_stream` is the same sum with one copy
// for every row (the row index only in addresses): it stays equal under any rewrite.
struct Params { rows: u32, n: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn two_copies(@builtin(global_invocation_id) gid: vec3<u32>) {
  let m = gid.x;
  if (m >= P.rows) { return; }
  let b = m * P.n;
  var s = 0.0;
  if (m == 0u) {
    for (var i = 0u; i < P.n; i += 4u) {
      s = s + x[b + i] * w[i] + x[b + i + 1u] * w[i + 1u] + x[b + i + 2u] * w[i + 2u] + x[b + i + 3u] * w[i + 3u];
    }
  } else {
    for (var i = 0u; i < P.n; i += 4u) {
      s = s + x[b + i] * w[i] + x[b + i + 1u] * w[i + 1u] + x[b + i + 2u] * w[i + 2u] + x[b + i + 3u] * w[i + 3u];
    }
  }
  y[m] = s / f32(P.n);
}

@compute @workgroup_size(64)
fn one_stream(@builtin(global_invocation_id) gid: vec3<u32>) {
  let m = gid.x;
  if (m >= P.rows) { return; }
  let b = m * P.n;
  var s = 0.0;
  for (var i = 0u; i < P.n; i += 4u) {
    s = s + x[b + i] * w[i] + x[b + i + 1u] * w[i + 1u] + x[b + i + 2u] * w[i + 2u] + x[b + i + 3u] * w[i + 3u];
  }
  y[m] = s / f32(P.n);
}
