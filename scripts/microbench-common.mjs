// What the plain-Node WebGPU microbenchmarks of exact integer sums (scripts/int8-matrix-microbench.mjs,
// scripts/dp4a-microbench.mjs) share: the problem (random 4-bit codes, scales, biases and x), x in fixed point per
// group, the float64 references, and on the GPU buffers, a checked read-back and the time of one dispatch from a
// pass of many. Not part of the product (the engine's own timing is src/bench/timer.ts).

/** Weights per quantization group. */
export const GS = 64;

/**
 * A 4-bit affine linear [N x K] with M rows of x, the same for every script and run (a fixed-seed LCG, drawn in the
 * order codes, scales, biases, x): q[n K + k] in 0..15, scale and bias [n G + g] (G = K / 64), sbias the pairs
 * (scale, bias) at [g N + n], and x with an outlier 40 times the rest in 2% of places (the fixed point's worst
 * case: a group's small values keep fewer bits).
 */
export function affineProblem(N, K, M) {
  const G = K / GS;
  let seed = 12345;
  const rnd = () => (seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32;
  const q = new Uint8Array(N * K).map(() => (rnd() * 16) | 0);
  const scale = new Float32Array(N * G).map(() => (rnd() + 0.5) / 64);
  const bias = new Float32Array(N * G).map(() => -(rnd() + 0.5) / 8);
  const sbias = new Float32Array(2 * N * G);
  for (let g = 0; g < G; g++)
    for (let n = 0; n < N; n++) {
      sbias[2 * (g * N + n)] = scale[n * G + g];
      sbias[2 * (g * N + n) + 1] = bias[n * G + g];
    }
  const x = new Float32Array(M * K).map(() => (rnd() - 0.5) * 2 * (rnd() < 0.02 ? 40 : 1));
  return { N, K, G, q, scale, bias, sbias, x };
}

/**
 * Rows 0 .. M-1 of x in fixed point per group: X = round(x / 2^e) with 2^e set so that the group's largest |x|
 * takes `bits` bits; xe holds (2^e, the group's x sum in f32) at [m G + g].
 */
export function fixedPoint(p, M, bits) {
  const { K, G, x } = p;
  const xe = new Float32Array(2 * M * G);
  const X = new Float64Array(M * K);
  for (let m = 0; m < M; m++)
    for (let g = 0; g < G; g++) {
      let mx = 0;
      let sx = 0;
      for (let k = g * GS; k < (g + 1) * GS; k++) {
        mx = Math.max(mx, Math.abs(x[m * K + k]));
        sx += x[m * K + k];
      }
      const e = mx === 0 ? 1 : 2 ** (Math.floor(Math.log2(mx)) - (bits - 1));
      xe[2 * (m * G + g)] = e;
      xe[2 * (m * G + g) + 1] = Math.fround(sx);
      for (let k = g * GS; k < (g + 1) * GS; k++) X[m * K + k] = Math.round(x[m * K + k] / e);
    }
  return { X, xe };
}

/** The L balanced signed bytes of integer v, lowest first (v = sum 256^l limb_l); throws if v needs more. */
export function limbs(v, L) {
  const out = [];
  for (let l = 0; l < L; l++) {
    const limb = ((((v + 128) % 256) + 256) % 256) - 128;
    out.push(limb);
    v = (v - limb) / 256;
  }
  if (v !== 0) throw new Error(`x does not fit ${L} limbs`);
  return out;
}

/**
 * float64 of rows 0 .. M-1: yq of the same integer sums (what a kernel must match up to its f32 closing), yx of
 * the exact x (how far the fixed point takes y), and yf an f32 chain of products as an f32 kernel sums them (each
 * group's fmas in k order, then scale and bias: roughly the f32 path's error, not its exact order).
 */
export function reference(p, M, X, xe) {
  const { N, K, G, q, scale, bias, x } = p;
  const f = Math.fround;
  const yq = new Float64Array(M * N);
  const yx = new Float64Array(M * N);
  const yf = new Float64Array(M * N);
  for (let m = 0; m < M; m++)
    for (let n = 0; n < N; n++) {
      let a = 0;
      let b = 0;
      let c = 0;
      for (let g = 0; g < G; g++) {
        let d = 0;
        let dx = 0;
        let df = 0;
        for (let k = g * GS; k < (g + 1) * GS; k++) {
          d += q[n * K + k] * X[m * K + k];
          dx += q[n * K + k] * x[m * K + k];
          df = f(df + q[n * K + k] * x[m * K + k]);
        }
        const sc = scale[n * G + g];
        const bx = bias[n * G + g] * xe[2 * (m * G + g) + 1];
        a += sc * d * xe[2 * (m * G + g)] + bx;
        b += sc * dx + bx;
        c = f(f(c + f(sc * df)) + f(bx));
      }
      yq[m * N + n] = a;
      yx[m * N + n] = b;
      yf[m * N + n] = c;
    }
  return { yq, yx, yf };
}

/** The largest |y - yq|, |y - yx| and |yf - yx| over the first `count` outputs, each over the largest |yx|. */
export function errors(y, ref, count) {
  let dq = 0;
  let dx = 0;
  let df = 0;
  let big = 0;
  for (let i = 0; i < count; i++) {
    dq = Math.max(dq, Math.abs(y[i] - ref.yq[i]));
    dx = Math.max(dx, Math.abs(y[i] - ref.yx[i]));
    df = Math.max(df, Math.abs(ref.yf[i] - ref.yx[i]));
    big = Math.max(big, Math.abs(ref.yx[i]));
  }
  const rel = (v) => (v / big).toExponential(2);
  return `of max |y|: |y - integer sums| ${rel(dq)}, |y - f64 of x| ${rel(dx)} (an f32 chain: ${rel(df)})`;
}

/**
 * Helpers bound to `device`; `timestamps`: whether the device was created with 'timestamp-query'. Any error the
 * device reports outside an error scope ends the process with status 1: a microbenchmark that runs on after a
 * failed call (a buffer write refused, a pipeline not created) prints times and checks of something else.
 */
export function gpuHelpers(device, timestamps) {
  const U = GPUBufferUsage;
  device.addEventListener('uncapturederror', (e) => {
    process.stderr.write(`WebGPU error: ${e.error.message}\n`);
    process.exit(1);
  });
  /** A buffer holding `data` (16-byte multiple, at least 16 bytes), also copyable both ways. */
  const buf = (data, usage = U.STORAGE) => {
    const size = Math.max(16, Math.ceil(data.byteLength / 16) * 16);
    const b = device.createBuffer({ size, usage: usage | U.COPY_DST | U.COPY_SRC });
    device.queue.writeBuffer(b, 0, data.buffer, data.byteOffset, data.byteLength);
    return b;
  };
  /** The first `bytes` of buffer `b` as floats. */
  async function read(b, bytes) {
    const st = device.createBuffer({ size: bytes, usage: U.MAP_READ | U.COPY_DST });
    const enc = device.createCommandEncoder();
    enc.copyBufferToBuffer(b, 0, st, 0, bytes);
    device.queue.submit([enc.finish()]);
    await st.mapAsync(GPUMapMode.READ);
    const out = new Float32Array(st.getMappedRange().slice(0));
    st.destroy();
    return out;
  }
  /** A kernel's output buffer, which checked runs first fill with NaN (fillNaN) and then read (readWritten). */
  const output = (bytes) => device.createBuffer({ size: bytes, usage: U.STORAGE | U.COPY_SRC | U.COPY_DST });
  const fillNaN = (b) => device.queue.writeBuffer(b, 0, new Float32Array(b.size / 4).fill(Number.NaN));
  /** The first `bytes` of `b` as floats; throws where one is still NaN (an output the run did not write). */
  async function readWritten(b, bytes, what) {
    const out = await read(b, bytes);
    const missing = out.findIndex(Number.isNaN);
    if (missing >= 0) throw new Error(`${what}: output ${missing} was not written (NaN)`);
    return out;
  }
  const querySet = timestamps ? device.createQuerySet({ type: 'timestamp', count: 2 }) : null;
  const resolved = device.createBuffer({ size: 16, usage: U.QUERY_RESOLVE | U.COPY_SRC });
  /**
   * Seconds per dispatch of `workgroups` workgroups: `iters` dispatches in one pass, cycling through the bind groups
   * (copies of the weights, so that each dispatch reads them from memory), timed by the pass's timestamps where the
   * device has them, else by the wall clock of the submit.
   */
  async function time(pipeline, groups, iters, workgroups) {
    const enc = device.createCommandEncoder();
    const ts = querySet ? { querySet, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 } : undefined;
    const pass = enc.beginComputePass(ts ? { timestampWrites: ts } : {});
    pass.setPipeline(pipeline);
    for (let i = 0; i < iters; i++) {
      pass.setBindGroup(0, groups[i % groups.length]);
      pass.dispatchWorkgroups(workgroups);
    }
    pass.end();
    const st = device.createBuffer({ size: 16, usage: U.MAP_READ | U.COPY_DST });
    if (querySet) {
      enc.resolveQuerySet(querySet, 0, 2, resolved, 0);
      enc.copyBufferToBuffer(resolved, 0, st, 0, 16);
    }
    const t0 = performance.now();
    device.queue.submit([enc.finish()]);
    await device.queue.onSubmittedWorkDone();
    const wall = (performance.now() - t0) / 1e3 / iters;
    if (!querySet) {
      st.destroy();
      return wall;
    }
    await st.mapAsync(GPUMapMode.READ);
    const stamps = new BigUint64Array(st.getMappedRange().slice(0));
    st.destroy();
    return Number(stamps[1] - stamps[0]) / 1e9 / iters;
  }
  return { buf, output, fillNaN, readWritten, time };
}
