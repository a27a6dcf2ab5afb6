//#include "common.wgsl"
// Scalar helpers of the Qwen3.5 kernels (gated_delta.wgsl, qwen_ops.wgsl), built on common.wgsl's
// exp_ref so that every adapter runs the same algorithm (WGSL's exp and log may be loose).
// Relaxed-math exactness: one stream. Helpers only; each kernel that includes them says how its rows reach them.

// 1 / (1 + e^-x), written so that no branch overflows: e^x / (1 + e^x) for x < 0.
fn sigmoid_ref(x: f32) -> f32 {
  if (x < 0.0) {
    let e = exp_ref(x);
    return e / (1.0 + e);
  }
  return 1.0 / (1.0 + exp_ref(-x));
}

// x * sigmoid(x), as x / (1 + e^-x) (the float64 twin's form) where e^-x cannot overflow.
fn silu_ref(x: f32) -> f32 {
  if (x < 0.0) {
    let e = exp_ref(x);
    return x * e / (1.0 + e);
  }
  return x / (1.0 + exp_ref(-x));
}

// ln(x) for a normal positive x: x = 2^e m with m in [sqrt(1/2), sqrt(2)), ln m = 2 atanh(s),
// s = (m - 1) / (m + 1) (|s| <= 0.172, series to s^11: truncation under 1e-10 relative), e ln 2 added
// in two parts (Cody-Waite constants of exp_ref) so that it does not round away ln m.
fn log_ref(x: f32) -> f32 {
  let fr = frexp(x);
  var m = fr.fract;
  var e = fr.exp;
  if (m < 0.70710678) {
    m = m * 2.0;
    e = e - 1;
  }
  let f = m - 1.0; // exact (Sterbenz)
  let s = f / (2.0 + f);
  let z = s * s;
  let p = 1.0 + z * (1.0 / 3.0 + z * (1.0 / 5.0 + z * (1.0 / 7.0 + z * (1.0 / 9.0 + z * (1.0 / 11.0)))));
  let fe = f32(e);
  return fe * 0.693145751953125 + (fe * 1.428606765330187e-6 + 2.0 * s * p);
}

// softplus(x) = ln(1 + e^x) with torch's threshold 20 (x above it passes). ln(1 + y) as
// ln(u) * y / (u - 1), u = 1 + y (Goldberg's correction of the rounding of 1 + y).
fn softplus_ref(x: f32) -> f32 {
  if (x > 20.0) { return x; }
  let y = exp_ref(x);
  let u = 1.0 + y;
  if (u == 1.0) { return y; }
  return log_ref(u) * (y / (u - 1.0));
}
