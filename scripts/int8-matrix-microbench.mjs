// Diagnostic (not part of the product; its results: docs/PERFORMANCE.md, integer matvec): an
// exact-INTEGER 4-bit matvec whose code x activation products run on the GPU's int8 matrix units (Dawn's
// `chromium-experimental-subgroup-matrix`, behind its `allow_unsafe_apis` toggle; on the H200 the only configs are
// i8/u8 -> i32/u32 at 16 x 16 x 32 and 16 x 8 x 32), beside a plain-WGSL twin (dot4I8Packed) that computes the same
// integer sums on any adapter, and a weight-stream kernel that isolates the loads.
//
//   y[m, n] = sum_g ( scale[n, g] * (2^e[m, g] * sum_{k in g} q[n, k] X[m, k]) + bias[n, g] * sx[m, g] )
//
// X[m, k] = round(x[m, k] / 2^e[m, g]) is row m's x in fixed point per group of 64 (|X| < 2^30, so the largest
// element keeps 30 bits), split into four balanced signed bytes L0 + 2^8 L1 + 2^16 L2 + 2^24 L3 (the matrix unit's
// left operand has a row per (row of x, limb): four rows of x per 16 x 32 tile). Integer sums are exact in any
// order, so the matrix unit and the twin give the same i32 sums, whatever M; the closing (the limbs' sums to f32,
// scale, x sum, a Neumaier partial per slice of K, the slices added in order) is the same f32 source for every M
// and both kernels. Here each M and each kernel is a module of its own (the tile count RT is a constant), so equal
// bytes across them are what a compiler gives, not a guarantee (an engine would run one pipeline for every M, as
// the f32 kernel does): both are checked, with the error against float64.
//
// Usage (repo root; Node with the npm `webgpu` package, on a machine with a GPU):
//   node scripts/int8-matrix-microbench.mjs [--rows 1,4,8] [--n 15360] [--k 3840] [--slices 2,4] [--cold 256]
//       [--paths mma,twin] [--knockout a,mma,store,epi,bar] [--check 0|1] [--stream D] [--stream-sts]
// --slices: subgroups per workgroup, each a contiguous slice of K (every M the same); --knockout removes one cost
// of the matrix-unit kernel (wrong outputs: a time only): a: the A tiles loaded once, not per group; mma: no
// multiplies; store: no readout of the accumulator (which leaves the matrix work dead); epi: no closing; bar: no
// barriers in the loop. --stream D: instead of the matvec, only its weight loads, D groups ahead (loop unrolled by
// D), folded by XOR, or with --stream-sts expanded into workgroup memory as the matvec does.
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
    slices: { type: 'string', default: '2,4' },
    cold: { type: 'string', default: '256' },
    paths: { type: 'string', default: 'mma,twin' },
    knockout: { type: 'string', default: '' },
    check: { type: 'string', default: '1' },
    iters: { type: 'string', default: '300' },
    stream: { type: 'string' },
    'stream-sts': { type: 'boolean', default: false },
  },
});
const N = Number(o.n);
const K = Number(o.k);
const G = K / GS;
const U = GPUBufferUsage;
const KO = new Set(o.knockout.split(',').filter(Boolean));
if (N % 16 || K % GS) throw new Error('--n: a multiple of 16 (the tiles); --k: a multiple of 64 (the groups)');

// Dawn keeps its instance alive only while `gpu` is referenced: a collected instance crashes the process.
const gpu = create(['enable-dawn-features=allow_unsafe_apis']);
const adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
if (!adapter) throw new Error('no WebGPU adapter (on Linux: a Vulkan driver; scripts/provision-webgpu.sh)');
const want = ['subgroups', 'timestamp-query', 'chromium-experimental-subgroup-matrix'].filter((f) =>
  adapter.features.has(f),
);
const device = await adapter.requestDevice({
  requiredFeatures: want,
  requiredLimits: {
    maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
    maxBufferSize: adapter.limits.maxBufferSize,
  },
});
globalThis.keepAlive = [gpu, adapter, device];
const configs = (adapter.info.subgroupMatrixConfigs ?? []).map(
  (c) => `${c.componentType}->${c.resultComponentType} ${c.M}x${c.N}x${c.K}`,
);
log(`adapter ${adapter.info.vendor} ${adapter.info.description}; subgroup matrices: ${configs.join(', ') || 'none'}`);
// The matrix-unit kernel takes its subgroup as lid / 32's slice of K (subgroup_id) and its lane as lid % 32.
const sub32 = adapter.info.subgroupMinSize === 32 && adapter.info.subgroupMaxSize === 32;
const hasMma = want.includes('chromium-experimental-subgroup-matrix') && sub32;
if (want.includes('chromium-experimental-subgroup-matrix') && !sub32)
  log('subgroups are not all of 32 lanes: no mma path');

// ---------------------------------------------------------------- the matvec
// T subgroups per workgroup, one tile of 16 features; subgroup s takes groups s per .. s per + per - 1. Per group:
// each lane expands its 16 bytes of codes (feature l / 2, half l % 2 of the group) to bytes in workgroup memory
// (B, column-major, 32 bytes a column), the subgroup multiplies the group's two 32-wide chunks of A (x limbs,
// RT tiles of 16 rows) by them, reads the accumulator out through workgroup memory, and closes its outputs.
function matvec(path, T, RT) {
  const mma = path === 'mma';
  const bar = KO.has('bar') && mma ? '' : 'workgroupBarrier();';
  const aLoad = (rt) =>
    KO.has('a')
      ? `aOnce${rt}[h]`
      : `subgroupMatrixLoad<subgroup_matrix_left<i8, 32, 16>>(&xl, ((g * 2u + h) * RT + ${rt}u) * 512u, false, 32u)`;
  const mul = (acc, a) => (KO.has('mma') ? '' : `${acc} = subgroupMatrixMultiplyAccumulate(${a}, b, ${acc});`);
  const sums = mma
    ? `
    for (var h = 0u; h < 2u; h++) {
      let b = subgroupMatrixLoad<subgroup_matrix_right<i8, 16, 32>>(&bs, (s * 256u + h * 128u) * 4u, true, 32u);
      let a0 = ${aLoad(0)};
      ${mul('acc0', 'a0')}
      if (RT > 1u) {
        let a1 = ${aLoad(1)};
        ${mul('acc1', 'a1')}
      }
    }
    ${
      KO.has('store')
        ? 'if (p.N == 0u) { parts[0].x += f32(xl[0]) + f32(accs[0]); } // keeps the bindings'
        : `subgroupMatrixStore(&accs, s * RT * 256u, acc0, false, 16u);
    if (RT > 1u) { subgroupMatrixStore(&accs, (s * RT + 1u) * 256u, acc1, false, 16u); }`
    }
    acc0 = subgroup_matrix_result<i32, 16, 16>();
    acc1 = subgroup_matrix_result<i32, 16, 16>();`
    : `
    for (var rt = 0u; rt < RT; rt++) {
      for (var e = ln; e < 256u; e += 32u) {
        let r = e / 16u;
        let n = e % 16u;
        var a = 0;
        for (var h = 0u; h < 2u; h++) {
          let xa = ((g * 2u + h) * RT + rt) * 128u + r * 8u; // row r's 32 bytes of chunk h
          let wb = s * 256u + (h * 16u + n) * 8u;            // feature n's 32 bytes of chunk h
          for (var j = 0u; j < 8u; j++) { a += dot4I8Packed(u32(xl[xa + j]), u32(bs[wb + j])); }
        }
        accs[(s * RT + rt) * 256u + e] = a;
      }
    }`;
  // group 0's two chunks of tile rt, for every group (the knock-out a); both names exist for any RT (the code of
  // tile 1 is there, behind RT > 1)
  const aOnce = (rt) => {
    const t = Math.min(rt, RT - 1);
    return (
      `var aOnce${rt} = array(subgroupMatrixLoad<subgroup_matrix_left<i8, 32, 16>>(&xl, ${t * 512}u, false, 32u), ` +
      `subgroupMatrixLoad<subgroup_matrix_left<i8, 32, 16>>(&xl, ${(RT + t) * 512}u, false, 32u));`
    );
  };
  return `
${mma ? 'enable chromium_experimental_subgroup_matrix;\ndiagnostic(off, chromium_experimental.subgroup_matrix_uniformity);' : ''}
struct Params { N: u32, G: u32, M: u32, per: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> wq: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> xl: array<i32>;
@group(0) @binding(3) var<storage, read> xe: array<vec2<f32>>;     // (2^e, x sum) per (row, group)
@group(0) @binding(4) var<storage, read> sbias: array<vec2<f32>>;  // (scale, bias) per (group, feature)
@group(0) @binding(5) var<storage, read_write> y: array<f32>;
const T = ${T}u;
const RT = ${RT}u;
const JMAX = 4u; // outputs a lane closes: M * 16 / 32, M <= 8
var<workgroup> bs: array<i32, ${T * 256}>;
var<workgroup> accs: array<i32, ${T * RT * 256}>;
var<workgroup> part: array<vec2<f32>, ${T * 128}>;
fn ksum_add(q: vec2<f32>, v: f32) -> vec2<f32> {
  let s = q.x + v;
  let c = select((v - s) + q.x, (q.x - s) + v, abs(q.x) >= abs(v));
  return vec2<f32>(s, q.y + c);
}
@compute @workgroup_size(${T * 32})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32${mma ? ', @builtin(subgroup_id) sid: u32' : ''}) {
  let s = ${mma ? 'sid' : 'lid / 32u'}; // the matrix builtins need subgroup-uniform operands: subgroup_id is one
  let ln = lid % 32u;
  let nt = wid.x;
  let n0 = nt * 16u;
  let g0 = s * p.per;
  var parts: array<vec2<f32>, JMAX>;
  ${mma ? 'var acc0 = subgroup_matrix_result<i32, 16, 16>();\n  var acc1 = subgroup_matrix_result<i32, 16, 16>();' : ''}
  ${mma && KO.has('a') ? `${aOnce(0)}\n  ${aOnce(1)}` : ''}
  let wbase = s * 256u + ((ln & 1u) * 16u + (ln >> 1u)) * 8u;
  var wv = wq[(nt * p.G + g0) * 32u + ln];
  for (var i = 0u; i < p.per; i++) {
    let g = g0 + i;
    let cur = wv;
    if (i + 1u < p.per) { wv = wq[(nt * p.G + g + 1u) * 32u + ln]; }
    ${bar}
    bs[wbase + 0u] = bitcast<i32>(cur.x & 0x0F0F0F0Fu);
    bs[wbase + 1u] = bitcast<i32>((cur.x >> 4u) & 0x0F0F0F0Fu);
    bs[wbase + 2u] = bitcast<i32>(cur.y & 0x0F0F0F0Fu);
    bs[wbase + 3u] = bitcast<i32>((cur.y >> 4u) & 0x0F0F0F0Fu);
    bs[wbase + 4u] = bitcast<i32>(cur.z & 0x0F0F0F0Fu);
    bs[wbase + 5u] = bitcast<i32>((cur.z >> 4u) & 0x0F0F0F0Fu);
    bs[wbase + 6u] = bitcast<i32>(cur.w & 0x0F0F0F0Fu);
    bs[wbase + 7u] = bitcast<i32>((cur.w >> 4u) & 0x0F0F0F0Fu);
    ${bar}
    ${sums}
    ${bar}
    for (var j = 0u; j < JMAX; j++) {
      let idx = ln + 32u * j;
      if (idx < p.M * 16u${KO.has('epi') && mma ? ' && p.N == 0u' : ''}) {
        let m = idx / 16u;
        let n = idx % 16u;
        var a: array<i32, 4>;
        for (var l = 0u; l < 4u; l++) {
          let r = m * 4u + l;
          a[l] = accs[(s * RT + r / 16u) * 256u + (r % 16u) * 16u + n];
        }
        // the limbs' sums: each below 2^17 in magnitude, so the two i32 combinations are exact
        let d = f32(a[3] * 256 + a[2]) * 65536.0 + f32(a[1] * 256 + a[0]);
        let e = xe[m * p.G + g];
        let sb = sbias[g * p.N + n0 + n];
        parts[j] = ksum_add(ksum_add(parts[j], sb.x * (d * e.x)), sb.y * e.y);
      }
    }
  }
  for (var j = 0u; j < JMAX; j++) {
    let idx = ln + 32u * j;
    if (idx < p.M * 16u) { part[s * 128u + idx] = parts[j]; }
  }
  workgroupBarrier();
  if (s == 0u) {
    for (var j = 0u; j < JMAX; j++) {
      let idx = ln + 32u * j;
      if (idx < p.M * 16u) {
        var t = vec2<f32>(0.0);
        var c = 0.0;
        for (var u = 0u; u < T; u++) {
          let q = part[u * 128u + idx];
          t = ksum_add(t, q.x);
          c += q.y;
        }
        y[(idx / 16u) * p.N + n0 + idx % 16u] = t.x + (t.y + c);
      }
    }
  }
}`;
}

// The weight loads of the matvec alone, D groups ahead, the loop unrolled by D so that no word in flight is copied
// (a rotating ring of words, which copies them, ran no faster at any depth). With `sts`, each group's words are
// expanded into workgroup memory as the matvec does, without its barriers (a rough figure: a compiler may merge
// stores to the same slot).
function stream(T, D, sts) {
  const step = (u) => `
    if (i + ${u}u < p.per) {
      let c = w${u};
      ${
        sts
          ? [0, 1, 2, 3]
              .map(
                (j) => `bs[wbase + ${2 * j}u] = bitcast<i32>(c[${j}] & 0x0F0F0F0Fu);
      bs[wbase + ${2 * j + 1}u] = bitcast<i32>((c[${j}] >> 4u) & 0x0F0F0F0Fu);`,
              )
              .join('\n      ')
          : 'acc ^= c.x ^ c.y ^ c.z ^ c.w;'
      }
      w${u} = wq[(nt * p.G + g0 + min(i + ${u + D}u, p.per - 1u)) * 32u + ln];
    }`;
  return `
struct Params { N: u32, G: u32, M: u32, per: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> wq: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;
var<workgroup> bs: array<i32, ${T * 256}>;
@compute @workgroup_size(${T * 32})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let s = lid / 32u;
  let ln = lid % 32u;
  let nt = wid.x;
  let g0 = s * p.per;
  let wbase = s * 256u + ((ln & 1u) * 16u + (ln >> 1u)) * 8u;
  var acc = 0u;
${Array.from({ length: D }, (_, u) => `  var w${u} = wq[(nt * p.G + g0 + min(${u}u, p.per - 1u)) * 32u + ln];`).join('\n')}
  for (var i = 0u; i < p.per; i += ${D}u) {${Array.from({ length: D }, (_, u) => step(u)).join('')}
  }
  ${sts ? 'workgroupBarrier();\n  acc = u32(bs[(ln * 7u) % 256u]);' : ''}
  if (acc == 12345u) { y[lid] = 1.0; }
}`;
}

// ---------------------------------------------------------------- data
const rows = o.rows.split(',').map(Number);
const MMAX = Math.max(...rows);
if (MMAX > 8) throw new Error('--rows: at most 8 (the closing takes four outputs a lane)');
const P = affineProblem(N, K, MMAX);
const { q, sbias } = P;
// The codes in the tile layout: tile nt (16 features), group g, lane l: feature 16 nt + l / 2, codes k = 64 g +
// 32 (l % 2) .. + 31 as four words of eight nibbles.
const wq = new Uint32Array((N * K) / 8);
for (let nt = 0; nt < N / 16; nt++)
  for (let g = 0; g < G; g++)
    for (let l = 0; l < 32; l++)
      for (let j = 0; j < 4; j++) {
        const n = nt * 16 + (l >> 1);
        const k0 = g * GS + (l & 1) * 32 + j * 8;
        let w = 0;
        for (let i = 0; i < 8; i++) w |= q[n * K + k0 + i] << (4 * i);
        wq[((nt * G + g) * 32 + l) * 4 + j] = w >>> 0;
      }
// Where the expansion puts code k of a 32-code chunk: word j's low nibbles (k = 8j, 8j + 2, ..) fill bytes 8j ..
// 8j + 3, its high ones (8j + 1, 8j + 3, ..) bytes 8j + 4 .. 8j + 7. The limbs of x follow the same order.
const kOfByte = Int32Array.from({ length: 32 }, (_, b) => 8 * (b >> 3) + ((b & 7) < 4 ? 2 * (b & 7) : 2 * (b & 3) + 1));
function prepare(M) {
  const RT = Math.ceil((4 * M) / 16);
  const xl = new Int8Array(G * 2 * RT * 512);
  const { X, xe } = fixedPoint(P, M, 30);
  for (let m = 0; m < M; m++)
    for (let c = 0; c < 2 * G; c++)
      for (let b = 0; b < 32; b++)
        limbs(X[m * K + c * 32 + kOfByte[b]], 4).forEach((limb, l) => {
          const r = 4 * m + l;
          xl[((c * RT + ((r / 16) | 0)) * 16 + (r % 16)) * 32 + b] = limb;
        });
  return { RT, xl, xe, X };
}

// ---------------------------------------------------------------- buffers and timing
const { buf, output, fillNaN, readWritten, time } = gpuHelpers(device, want.includes('timestamp-query'));
// --cold MB: copies of the weights cycled through, so that each dispatch reads its weights from memory (the
// H200's 50 MB L2 holds one 28 MiB matrix), as the bench does
const copies = Math.max(1, Math.ceil((Number(o.cold) * 2 ** 20) / wq.byteLength));
const wqs = Array.from({ length: copies }, () => buf(wq));
const sbBuf = buf(sbias);
const yBuf = output(MMAX * N * 4);
log(`N ${N} K ${K}: ${(wq.byteLength / 2 ** 20).toFixed(1)} MiB of codes, ${copies} copies`);

// ---------------------------------------------------------------- runs
const sliceCounts = o.slices.split(',').map(Number);
if (sliceCounts.some((T) => G % T)) throw new Error('--slices: each must divide the groups of K');
const bytesPerDispatch = wq.byteLength + N * G * 2 * 2; // codes + bf16 scales and biases, as the engine stores them
const firstBytes = new Map(); // `${T}:${M}` -> the first path's output bytes
for (const M of rows) {
  const { RT, xl, xe, X } = prepare(M);
  const xlBuf = buf(new Int32Array(xl.buffer));
  const xeBuf = buf(xe);
  const ref = o.check === '1' && !o.stream ? reference(P, M, X, xe) : undefined;
  for (const T of sliceCounts)
    for (const path of o.stream ? ['stream'] : o.paths.split(',')) {
      if (path === 'mma' && !hasMma) continue;
      const code = o.stream ? stream(T, Number(o.stream), o['stream-sts']) : matvec(path, T, RT);
      // compile errors inside a scope: the helpers end the process on an uncaptured one, and this one is reported
      device.pushErrorScope('validation');
      const module = device.createShaderModule({ code });
      const failed = (await module.getCompilationInfo()).messages.filter((m) => m.type === 'error');
      const invalid = await device.popErrorScope();
      if (failed.length || invalid) {
        log(`M ${M} ${path} T ${T}: ${failed.map((e) => `${e.lineNum}: ${e.message}`).join(' | ') || invalid.message}`);
        continue;
      }
      const pipeline = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } });
      const params = buf(Uint32Array.of(N, G, M, G / T), U.UNIFORM);
      const all = [params, wqs[0], xlBuf, xeBuf, sbBuf, yBuf];
      const used = o.stream ? [0, 1, 5] : [0, 1, 2, 3, 4, 5];
      const groups = wqs.map((w) =>
        device.createBindGroup({
          layout: pipeline.getBindGroupLayout(0),
          entries: used.map((i) => ({ binding: i, resource: { buffer: i === 1 ? w : all[i] } })),
        }),
      );
      let check = '';
      if (ref) {
        // y starts as NaN, so that a run that writes nothing (or fails validation) cannot pass for the path before
        fillNaN(yBuf);
        device.pushErrorScope('validation');
        await time(pipeline, groups.slice(0, 1), 1, N / 16);
        const invalid = await device.popErrorScope();
        if (invalid) throw new Error(`M ${M} ${path} T ${T}: ${invalid.message}`);
        const y = await readWritten(yBuf, M * N * 4, `M ${M} ${path} T ${T}`);
        check = `; ${errors(y, ref, M * N)}`;
        const bytes = new Uint8Array(y.buffer).slice();
        const first = firstBytes.get(`${T}:${M}`);
        if (first) check += first.every((b, i) => b === bytes[i]) ? '; same bytes as the first path' : '; OTHER BYTES';
        else firstBytes.set(`${T}:${M}`, bytes);
        // block == chain: the rows this M shares with every smaller M run before, byte for byte
        for (const [key, earlier] of firstBytes) {
          const [t2, m2] = key.split(':').map(Number);
          if (t2 !== T || m2 >= M) continue;
          const equal = earlier.every((b, i) => b === bytes[i]);
          check += equal ? `; rows of M ${m2} equal` : `; rows of M ${m2} DIFFER`;
        }
      }
      // The H200 lowers its clocks within ~1.5 s of idling (the reference above takes seconds): 0.3 s of this
      // kernel first, untimed, as the bench warms the GPU before its end-to-end figures.
      for (const t0 = performance.now(); performance.now() - t0 < 300; ) await time(pipeline, groups, 100, N / 16);
      let best = Number.POSITIVE_INFINITY;
      for (let r = 0; r < 3; r++) best = Math.min(best, await time(pipeline, groups, Number(o.iters), N / 16));
      const bytes = o.stream ? wq.byteLength : bytesPerDispatch; // the stream reads the codes only
      const what = o.stream ? `stream D ${o.stream}${o['stream-sts'] ? ' + expansion' : ''}` : path;
      const ko = KO.size && path === 'mma' ? ` without ${[...KO].join(', ')}` : '';
      log(`M ${M} ${what}${ko} T ${T}: ${(best * 1e6).toFixed(1)} us, ${(bytes / best / 1e9).toFixed(0)} GB/s${check}`);
    }
}
process.exit(0);
