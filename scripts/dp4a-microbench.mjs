// Diagnostic (not part of the product; its results: docs/PERFORMANCE.md, integer matvec): an
// exact-INTEGER 4-bit matvec on WGSL's `dot4I8Packed` (the language extension packed_4x8_integer_dot_product: no
// `enable`, no toggle; expected to map to a dp4a instruction on NVIDIA, AMD and Intel GPUs and to be emulated on
// Apple GPUs, which have none: not checked here) in the lane layout of the f32 coop kernel's passes (k-major 16-byte
// words, T invocations per feature, R features per invocation, the T partials of an output added by one invocation
// in the order t = 0 .. T-1; the coop kernel's single-row loop may lay its lanes out otherwise, ROW_TL).
//
//   y[m, n] = sum_g ( scale[n, g] * (2^e[m, g] * sum_{k in g} q[n, k] X[m, k]) + bias[n, g] * sx[m, g] )
//
// X[m, k] = round(x[m, k] / 2^e[m, g]) is row m's x in fixed point per group of 64 (the group's largest element
// keeps 8 L - 2 bits), held as L balanced signed bytes (limbs). A word's eight codes are spread to bytes by two
// logic ops (low nibbles: k = 0, 2, 4, 6; high: 1, 3, 5, 7; the limbs are stored in that order), and each limb's
// sum over the group is an exact i32 (|sum| < 64 * 15 * 128 < 2^17), so the integer sums cannot depend on M or on
// the order of the dp4a; the closing (limb sums to f32, 2^e, scale, x sum, a Neumaier partial per invocation) is
// the same f32 code for every row. By a count from this source, per weight: L / 4 dp4a per row (and as many i32
// adds, unless the compiler folds them into the dp4a's accumulator), the closing's ~20 instructions per row,
// feature and group (~0.3 a weight), and 0.375 logic ops shared by the rows; the f32 kernel counts ~3.6 for a
// single row and ~8.1 for a block of 4 (docs/PERFORMANCE.md, matvec).
//
// What it prints per configuration and M: the time of one dispatch (cold weights, the best of three timings of
// --iters dispatches), GB/s over the codes with bf16 scales and biases (what the bench counts), and with --check 1
// the error of every row against float64 of the same integer sums and of the exact x, and whether every row of the
// block has the bits of the same row of x run alone (M = 1 with a row offset: block == chain). Each M is a module
// of its own here (with --rp 4 the same source), so equal bits across them are what the compiler gives, as in
// scripts/int8-matrix-microbench.mjs. x's limbs are made on the CPU: the dispatch that would make them in an engine
// is not timed.
//
// Usage (repo root; Node with the npm `webgpu` package, on a machine with a GPU):
//   node scripts/dp4a-microbench.mjs [--rows 1,4,8] [--n 15360] [--k 3840] [--cfg WG:T:R:L,...] [--rp m|dual|4]
//       [--cold 256] [--iters 300] [--check 0|1]
// --cfg: workgroup size, invocations per feature, features per invocation, limbs (3 or 4); --rp m: rows per pass =
// M (at most 4); --rp 4: one module source for every M with a run-time row count (what one pipeline for every M
// costs); --rp dual: one module source for every M with two loops, a single row's and a block's (4 rows a pass,
// rows past M computed from x's padding and not stored), chosen by M at run time (what an engine that keeps one
// pipeline for every M would run).
import { writeSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { create, globals } from 'webgpu';
import { affineProblem, errors, fixedPoint, GS, gpuHelpers, limbs, reference } from './microbench-common.mjs';

const log = (t) => writeSync(1, `${t}\n`);
Object.assign(globalThis, globals);
const { values: o } = parseArgs({
  options: {
    rows: { type: 'string', default: '1,4,8' },
    n: { type: 'string', default: '15360' },
    k: { type: 'string', default: '3840' },
    cfg: { type: 'string', default: '512:16:4:4' }, // WG:T:R:L[,...]
    rp: { type: 'string', default: 'm' }, // rows per pass: m (= M, max 4) or a number (runtime row count)
    cold: { type: 'string', default: '256' },
    iters: { type: 'string', default: '300' },
    check: { type: 'string', default: '1' },
  },
});
const N = Number(o.n);
const K = Number(o.k);
const G = K / GS;
const U = GPUBufferUsage;
// Dawn keeps its instance alive only while `gpu` is referenced: a collected instance crashes the process.
const gpu = create([]);
const adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
if (!adapter) throw new Error('no WebGPU adapter (on Linux: a Vulkan driver; scripts/provision-webgpu.sh)');
const want = ['timestamp-query'].filter((f) => adapter.features.has(f));
const device = await adapter.requestDevice({
  requiredFeatures: want,
  requiredLimits: {
    maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
    maxBufferSize: adapter.limits.maxBufferSize,
    maxComputeWorkgroupStorageSize: adapter.limits.maxComputeWorkgroupStorageSize,
    maxComputeInvocationsPerWorkgroup: adapter.limits.maxComputeInvocationsPerWorkgroup,
    maxComputeWorkgroupSizeX: adapter.limits.maxComputeWorkgroupSizeX,
  },
});
globalThis.keepAlive = [gpu, adapter, device];
log(`adapter ${adapter.info.vendor} ${adapter.info.description}`);

function kernel(WG, T, R, L, RP, runtimeRows) {
  // RP 'dual': one module with two loops, a single row's (RP = 1) and a block's (RP = 4, rows past M computed from
  // x's padding and not stored), chosen by M at run time: what one pipeline for every M would be
  if (RP === 'dual')
    return kernelHead(WG, T, R, L).replace(
      '@BODY@',
      `  if (p.M == 1u) {\n${loops(R, L, 1, false)}\n  } else {\n${loops(R, L, 4, false)}\n  }`,
    );
  return kernelHead(WG, T, R, L).replace('@BODY@', loops(R, L, RP, runtimeRows));
}
function kernelHead(WG, T, R, L) {
  const F = WG / T;
  const js = [...Array(R).keys()];
  const dExpr =
    L === 4 ? `f32(a.w * 256 + a.z) * 65536.0 + f32(a.y * 256 + a.x)` : `f32(a.z) * 65536.0 + f32(a.y * 256 + a.x)`;
  return `
struct Params { N: u32, G: u32, M: u32, x0: u32 } // x0: the first row of x (row m of y reads row x0 + m)
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> wq: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> xl: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> xe: array<vec2<f32>>;
@group(0) @binding(4) var<storage, read> sbias: array<vec2<f32>>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;
const WG = ${WG}u;
const T = ${T}u;
const F = ${F}u;
const R = ${R}u;
var<workgroup> part: array<vec2<f32>, ${R * WG}>;
fn ksum_add(q: vec2<f32>, v: f32) -> vec2<f32> {
  let s = q.x + v;
  let c = select((v - s) + q.x, (q.x - s) + v, abs(q.x) >= abs(v));
  return vec2<f32>(s, q.y + c);
}
fn close(p: vec2<f32>, a: vec4<i32>, e: vec2<f32>, sb: vec2<f32>) -> vec2<f32> {
  let d = ${dExpr};
  return ksum_add(ksum_add(p, sb.x * (d * e.x)), sb.y * e.y);
}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let t = lid / F;
  let f = lid % F;
  let base = wid.x * F * R;
${js.map((j) => `  let n${j} = base + ${j}u * F + f;`).join('\n')}
@BODY@
}`;
}
/** The passes over M's rows, RP rows a pass; runtimeRows: rows past M skipped in the loops (else computed). */
function loops(R, L, RP, runtimeRows) {
  const dots = (j, r) =>
    `acc${j}_${r} += vec4<i32>(${['x', 'y', 'z', 'w']
      .map((c, l) => (l < L ? `dot4I8Packed(lo${j}, xa.${c}) + dot4I8Packed(hi${j}, xb.${c})` : '0'))
      .join(', ')});`;
  const js = [...Array(R).keys()];
  const rs = [...Array(RP).keys()];
  const rowOk = (r) => (runtimeRows ? `if (${r}u < rows) ` : '');
  return `
  for (var r0 = 0u; r0 < p.M; r0 += ${RP}u) {
    let rows = min(${RP}u, p.M - r0);
${js.flatMap((j) => rs.map((r) => `    var p${j}_${r} = vec2<f32>(0.0);`)).join('\n')}
    // the next group's words, loaded a group ahead
${js.map((j) => `    var w${j}a = wq[(t * 2u) * p.N + n${j}];\n    var w${j}b = wq[(t * 2u + 1u) * p.N + n${j}];`).join('\n')}
    for (var g = t; g < p.G; g += T) {
${js.map((j) => `      let c${j}a = w${j}a;\n      let c${j}b = w${j}b;`).join('\n')}
      let gn = min(g + T, p.G - 1u);
${js.map((j) => `      w${j}a = wq[(gn * 2u) * p.N + n${j}];\n      w${j}b = wq[(gn * 2u + 1u) * p.N + n${j}];`).join('\n')}
${js.flatMap((j) => rs.map((r) => `      var acc${j}_${r} = vec4<i32>(0);`)).join('\n')}
      for (var i = 0u; i < 2u; i++) {
        for (var c = 0u; c < 4u; c++) {
${js.map((j) => `          let u${j} = select(c${j}a[c], c${j}b[c], i == 1u);\n          let lo${j} = u${j} & 0x0F0F0F0Fu;\n          let hi${j} = (u${j} >> 4u) & 0x0F0F0F0Fu;`).join('\n')}
${rs
  .map(
    (r) => `          ${rowOk(r)}{
            let xi = ((((p.x0 + r0 + ${r}u) * p.G + g) * 2u + i) * 4u + c) * 2u;
            let xa = xl[xi];
            let xb = xl[xi + 1u];
${js.map((j) => `            ${dots(j, r)}`).join('\n')}
          }`,
  )
  .join('\n')}
        }
      }
${rs
  .map(
    (r) => `      ${rowOk(r)}{
        let e = xe[(p.x0 + r0 + ${r}u) * p.G + g];
${js.map((j) => `        p${j}_${r} = close(p${j}_${r}, acc${j}_${r}, e, sbias[g * p.N + n${j}]);`).join('\n')}
      }`,
  )
  .join('\n')}
    }
    // the T partials of each (row, feature), added in the order t = 0 .. T-1
${rs
  .map(
    (r) => `    if (${r}u < rows) {
      workgroupBarrier();
${js.map((j) => `      part[(${j}u * T + t) * F + f] = p${j}_${r};`).join('\n')}
      workgroupBarrier();
      if (lid < R * F) {
        let j = lid / F;
        let ff = lid % F;
        var s = vec2<f32>(0.0);
        var cc = 0.0;
        for (var u = 0u; u < T; u++) {
          let q = part[(j * T + u) * F + ff];
          s = ksum_add(s, q.x);
          cc += q.y;
        }
        y[(r0 + ${r}u) * p.N + base + j * F + ff] = s.x + (s.y + cc);
      }
    }`,
  )
  .join('\n')}
  }`;
}

// ---------------------------------------------------------------- data
const rows = o.rows.split(',').map(Number);
const MMAX = Math.max(...rows);
const P = affineProblem(N, K, MMAX);
const { q, sbias } = P;
// The codes k-major: 16-byte word (g, i) of feature n at (g 2 + i) N + n, its u32 c holding codes k = 64 g + 32 i +
// 8 c .. + 7 as eight nibbles, lowest first (MLX's order within a word).
const wq = new Uint32Array((N * K) / 8);
for (let g = 0; g < G; g++)
  for (let i = 0; i < 2; i++)
    for (let n = 0; n < N; n++)
      for (let c = 0; c < 4; c++) {
        const k0 = g * 64 + i * 32 + c * 8;
        let w = 0;
        for (let b = 0; b < 8; b++) w |= q[n * K + k0 + b] << (4 * b);
        wq[((g * 2 + i) * N + n) * 4 + c] = w >>> 0;
      }
// x's limbs for dot4I8Packed: per (row, group, word i, u32 c), the low nibbles' four k (8 c + 0, 2, 4, 6) and the
// high ones' (8 c + 1, 3, 5, 7), each as L u32 of four signed bytes, one u32 per limb: a vec4 at index
// (((m G + g) 2 + i) 4 + c) 2 + h.
function prepare(L) {
  const xl = new Uint32Array(MMAX * G * 2 * 4 * 2 * 4);
  const { X, xe } = fixedPoint(P, MMAX, 8 * L - 2);
  for (let m = 0; m < MMAX; m++)
    for (let g = 0; g < G; g++)
      for (let i = 0; i < 2; i++)
        for (let c = 0; c < 4; c++)
          for (let h = 0; h < 2; h++)
            for (let b = 0; b < 4; b++)
              limbs(X[m * K + g * 64 + i * 32 + c * 8 + 2 * b + h], L).forEach((limb, l) => {
                xl[((((m * G + g) * 2 + i) * 4 + c) * 2 + h) * 4 + l] |= (limb & 0xff) << (8 * b);
              });
  return { xl, xe, X };
}
const { buf, output, fillNaN, readWritten, time } = gpuHelpers(device, want.includes('timestamp-query'));
const copies = Math.max(1, Math.ceil((Number(o.cold) * 2 ** 20) / wq.byteLength));
const wqs = Array.from({ length: copies }, () => buf(wq));
const sbBuf = buf(sbias);
const yBuf = output(MMAX * N * 4);
log(`N ${N} K ${K}: ${(wq.byteLength / 2 ** 20).toFixed(1)} MiB of codes, ${copies} copies`);
const bytesPerDispatch = wq.byteLength + N * G * 2 * 2;
const prepared = new Map(); // L -> x's limbs, exponents and the float64 references of every row
if (!(o.rp === 'm' || o.rp === 'dual' || Number(o.rp) >= 1))
  throw new Error('--rp: m, dual or a positive number of rows per pass');
for (const cfg of o.cfg.split(',')) {
  const [WG, T, R, L] = cfg.split(':').map(Number);
  // R <= T: the epilogue's R F invocations that add the partials must fit the workgroup's WG = T F
  if (![3, 4].includes(L) || WG % T || WG % 32 || T > G || R > T || N % ((WG / T) * R) || K % GS)
    throw new Error(
      `--cfg ${cfg}: L must be 3 or 4, T must divide WG (a multiple of 32), be at most K / 64 and at least R, and N be a multiple of WG / T * R`,
    );
  if (!prepared.has(L)) {
    const { xl, xe, X } = prepare(L);
    prepared.set(L, { xl, xe, ref: o.check === '1' ? reference(P, MMAX, X, xe) : undefined });
  }
  const { xl, xe, ref } = prepared.get(L);
  const xlBuf = buf(xl);
  const xeBuf = buf(xe);
  const wgs = N / ((WG / T) * R);
  const runtimeRows = o.rp !== 'm' && o.rp !== 'dual';
  /** The pipeline of M rows, and bind groups (one per weight copy) for x rows x0 .. x0 + M - 1. */
  async function build(M) {
    const RP = o.rp === 'dual' ? 'dual' : runtimeRows ? Number(o.rp) : Math.min(M, 4);
    // with rows per pass fixed at compile time, every pass must be full
    if (o.rp === 'm' && M % RP) throw new Error(`--rp m: M ${M} must be at most 4 or a multiple of 4`);
    // compile errors inside a scope: the helpers end the process on an uncaptured one, and this one is reported
    device.pushErrorScope('validation');
    const module = device.createShaderModule({ code: kernel(WG, T, R, L, RP, runtimeRows) });
    const failed = (await module.getCompilationInfo()).messages.filter((m) => m.type === 'error');
    const invalid = await device.popErrorScope();
    if (failed.length || invalid) {
      log(`${cfg} M ${M}: ${failed.map((e) => `${e.lineNum}: ${e.message}`).join(' | ') || invalid.message}`);
      return undefined;
    }
    const pipeline = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } });
    const groupsAt = (x0) => {
      const all = [buf(Uint32Array.of(N, G, M, x0), U.UNIFORM), wqs[0], xlBuf, xeBuf, sbBuf, yBuf];
      return wqs.map((w) =>
        device.createBindGroup({
          layout: pipeline.getBindGroupLayout(0),
          entries: all.map((b, i) => ({ binding: i, resource: { buffer: i === 1 ? w : b } })),
        }),
      );
    };
    return { pipeline, groupsAt };
  }
  /** One checked dispatch (y filled with NaN first, every output must be written): its M rows. */
  async function runChecked(pipeline, groups, M, what) {
    fillNaN(yBuf);
    device.pushErrorScope('validation');
    await time(pipeline, groups.slice(0, 1), 1, wgs);
    const invalid = await device.popErrorScope();
    if (invalid) throw new Error(`${what}: ${invalid.message}`);
    return new Uint32Array((await readWritten(yBuf, M * N * 4, what)).buffer);
  }
  // block == chain: each row of x run alone (M = 1, x row offset m), the bits every block's row m must have
  let chain;
  if (o.check === '1') {
    const one = await build(1);
    if (!one) continue;
    chain = new Uint32Array(MMAX * N);
    for (let m = 0; m < MMAX; m++)
      chain.set(await runChecked(one.pipeline, one.groupsAt(m), 1, `${cfg} row ${m}`), m * N);
  }
  for (const M of rows) {
    const built = await build(M);
    if (!built) continue;
    const groups = built.groupsAt(0);
    let check = '';
    if (chain) {
      const y = await runChecked(built.pipeline, groups, M, `${cfg} M ${M}`);
      check = `; ${errors(new Float32Array(y.buffer), ref, M * N)}`;
      const differ = [...Array(M).keys()].filter((m) =>
        y.subarray(m * N, (m + 1) * N).some((v, j) => v !== chain[m * N + j]),
      );
      check += differ.length
        ? `; rows ${differ.join(', ')} DIFFER from their single-row runs`
        : `; every row equals its single-row run`;
    }
    for (const t0 = performance.now(); performance.now() - t0 < 300; ) await time(built.pipeline, groups, 100, wgs);
    let best = Number.POSITIVE_INFINITY;
    for (let r = 0; r < 3; r++) best = Math.min(best, await time(built.pipeline, groups, Number(o.iters), wgs));
    log(
      `${cfg} rp ${o.rp} M ${M}: ${(best * 1e6).toFixed(1)} us, ${(bytesPerDispatch / best / 1e9).toFixed(0)} GB/s (${wgs} workgroups)${check}`,
    );
  }
}
process.exit(0);
