// Shared helpers, spliced into other kernels by `//#include "common.wgsl"` (src/gpu/shaders.ts).
// Relaxed-math exactness: one stream. Helpers only; each kernel that includes them says how its rows reach them.

// A bf16 value is the top 16 bits of an f32.
fn bf16_to_f32(bits: u32) -> f32 {
  return bitcast<f32>(bits << 16u);
}

// Round an f32 to the nearest bf16 (ties to even), returned as f32. NaN stays NaN.
fn round_bf16(x: f32) -> f32 {
  let u = bitcast<u32>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) { return x; }
  let r = u + 0x7fffu + ((u >> 16u) & 1u);
  return bitcast<f32>(r & 0xffff0000u);
}

// Element i of a packed array of u16 (bf16/f16 bit patterns) stored as u32 words, little endian.
fn u16_at(words_val: u32, i: u32) -> u32 {
  return (words_val >> ((i & 1u) * 16u)) & 0xffffu;
}

// Linear workgroup index for dispatches folded into 2-D (more than 65535 workgroups).
fn linear_workgroup(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
  return wid.x + wid.y * nwg.x;
}

// ---- Reference-grade transcendentals -------------------------------------------------------
// WGSL lets exp/tanh/inverseSqrt be loose (exp: 3 + 2|x| ULP; software adapters use fast
// approximations), and a 12-layer model amplifies such errors several-fold per layer. These give each
// adapter the same algorithm. Where f32 + - * / and sqrt are correctly rounded (lavapipe and SwiftShader
// are; WGSL itself allows a division 2.5 ULP), their error, in ULPs of the true value, is at most:
// - exp_ref: 1.5 ULP wherever e^x is a normal f32 (x in [-87.3, 88]); below that within 2^-126 (a
//   subnormal result may be flushed to zero); exactly 0 for x < -103.
// - tanh_ref: 2.1 ULP for |x| < 0.125 (the series), 1.6 ULP for |x| >= 1. Between, 1 - 2 / (e^{2|x|} + 1)
//   cancels and magnifies exp_ref's error by up to 7: 24 ULP on [0.125, 0.25), 10 on [0.25, 0.5), 4.4 on
//   [0.5, 1) (worst just above each lower end). 0.5 ULP past 9.1 (sign(x)).
// - rsqrt_ref: 1.5 ULP (the rounding of sqrt, passed on, and of the division).
// test/gpu/kernels-elementwise.test.ts asserts these figures (its helper tanhRefBound is the per-input
// analysis behind tanh_ref's) on lavapipe and SwiftShader; measured there, identically on both: exp_ref
// 1.16 ULP, tanh_ref 11.6 ULP (at 0.1251; 0.97 under 0.125, 0.83 from 1 on), rsqrt_ref 1.43 ULP.

// e^x: Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2, then a degree-7 Taylor polynomial.
fn exp_ref(x: f32) -> f32 {
  if (x < -103.0) { return 0.0; }
  // Large x overflows to +inf in ldexp at run time (callers pass x <= 18.2).
  let pn = exp_ref_parts(x);
  return ldexp(pn.x, i32(pn.y));
}

// exp_ref without a branch: the same steps for x >= -103, the polynomial evaluated and discarded below.
// For callers that take several exps in a row (attention.wgsl combined), which a branch each would run one
// after the other. n is clamped only so that discarded values convert to i32 defined (x >= -103: n >= -149).
fn exp_ref_sel(x: f32) -> f32 {
  let pn = exp_ref_parts(x);
  return select(ldexp(pn.x, i32(clamp(pn.y, -200.0, 200.0))), 0.0, x < -103.0);
}

// e^x = p 2^n: (p, n) of exp_ref's reduction and polynomial.
fn exp_ref_parts(x: f32) -> vec2<f32> {
  let n = round(x * 1.4426950408889634);
  let r = (x - n * 0.693145751953125) - n * 1.428606765330187e-6;
  var p = 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  return vec2<f32>(p, n);
}

// tanh(x): odd Taylor series near 0 (no cancellation), 1 - 2 / (e^{2|x|} + 1) elsewhere.
fn tanh_ref(x: f32) -> f32 {
  let a = abs(x);
  if (a < 0.125) {
    let x2 = x * x;
    // x - x^3/3 + 2x^5/15 - 17x^7/315 + 62x^9/2835
    return x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0 + x2 * (62.0 / 2835.0)))));
  }
  if (a > 9.1) { return sign(x); }
  let t = 1.0 - 2.0 / (exp_ref(2.0 * a) + 1.0);
  return select(t, -t, x < 0.0);
}

// GELU, tanh form (Gemma's gelu_pytorch_tanh): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// Shared by elementwise.wgsl geglu and matmul_coop.wgsl gate_up.
fn gelu_tanh(x: f32) -> f32 {
  return 0.5 * x * (1.0 + tanh_ref(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

// 1 / sqrt(x) from sqrt (inverseSqrt may be a 2-ULP approximation; sqrt is correctly rounded on the
// software adapters, though WGSL does not require it).
fn rsqrt_ref(x: f32) -> f32 {
  return 1.0 / sqrt(x);
}

// ---- Compensated summation ----------------------------------------------------------------
// Neumaier's variant of Kahan summation: s.x is the running sum, s.y the running compensation.
// Reductions in this engine are long (thousands of terms) and a 12-layer model amplifies each
// layer's error several-fold, so plain f32 accumulation is not accurate enough for a reference.
// Rotate-half RoPE of one pair (a, b) = (x[i], x[i + d/2]) by the angle with cosine c and sine s:
// (a c - b s, b c + a s), each rounded to bf16 when `round`. One definition for rope.wgsl and the fused
// q/k norm of rmsnorm.wgsl, so both compile the same expression.
fn rope_pair(a: f32, b: f32, c: f32, s: f32, round: bool) -> vec2<f32> {
  let r = vec2<f32>(a * c - b * s, b * c + a * s);
  if (round) { return vec2<f32>(round_bf16(r.x), round_bf16(r.y)); }
  return r;
}

fn ksum_add(s: vec2<f32>, v: f32) -> vec2<f32> {
  let t = s.x + v;
  let c = select((v - t) + s.x, (s.x - t) + v, abs(s.x) >= abs(v));
  return vec2<f32>(t, s.y + c);
}
fn ksum_value(s: vec2<f32>) -> f32 {
  return s.x + s.y;
}
