/**
 * Faults the exactness self-test can inject (src/parity/exactness-selftest.ts), to show that it catches a kernel
 * whose verify block runs one row through other instructions than the single-token chain does: what a relaxed
 * shader compiler (Metal's fast math) may do to one copy of a loop and not to another. Each fault rewrites a
 * kernel's WGSL text where a KernelCache created with it builds its shader modules; no other cache, and so no
 * engine, ever sees the rewritten text: the default pipelines are built from the unchanged sources.
 *
 * Each rewrite gives ONE row of a block (FAULT_ROW, a block of more than one row only) an alternate path that is
 * the same sum in exact arithmetic and different in f32, as a relaxed compiler's rewrites are:
 *   matmul:    the block path sums the four position sums of a group in another order (software class: the
 *              chunk vector's horizontal sum in matmul_lanes.wgsl; GPU class: group_dot in matmul_coop.wgsl);
 *   attention: the block path divides by the softmax denominator with both sides scaled by a run-time odd
 *              factor, `(o * s) / (l * s)`, s = 2M + 1 (`combine`, the software class's last pass, and
 *              `combined`, the GPU class's combine_fused). Not a reciprocal (`o * (1.0 / l)`) nor a constant
 *              rescaling (`o * (3.0 / (3.0 * l))`): Vulkan lets a driver divide through a reciprocal (NVIDIA's
 *              does, and an H100 folded both forms to the unfaulted `o / l`), and the compiler fuzzer's recip
 *              rewrite does the same to every row; then the faulted row equals the others and proves nothing. A
 *              factor known only at run time cannot be folded, and odd, it is never an exact power-of-two scaling.
 * An anchor that is no longer found in the kernel's source is an error, never a silently unfaulted kernel.
 */
export type KernelFault = 'matmul' | 'attention';

export const KERNEL_FAULTS: readonly KernelFault[] = ['matmul', 'attention'];

/** The row of a block that the faults send down another path. */
const FAULT_ROW = 1;

interface Rewrite {
  /** Shader files (as the KernelCache names them) whose expanded source holds the anchor. */
  shaders: readonly string[];
  /** Exact text of the kernel, replaced once per occurrence. */
  find: string;
  replace: string;
  /** Declarations the replacement needs (appended to the module: WGSL declarations are order-free). */
  helpers: string;
}

const LANES_GROUP = 'ksum4_add(&s, &c, scale * vec4<f32>(hsum(q0), hsum(q1), hsum(q2), hsum(q3)));';

const REWRITES: Record<KernelFault, readonly Rewrite[]> = {
  matmul: [
    {
      // software class: lanes_body, one loop over the rows m of a block
      shaders: ['matmul_lanes_subgroupx.wgsl', 'matmul_lanes_loadx.wgsl'],
      find: LANES_GROUP,
      replace: `if (P.M > 1u && m == FAULT_ROW) { ksum4_add(&s, &c, scale * vec4<f32>(hsum_fault(q0), hsum_fault(q1), hsum_fault(q2), hsum_fault(q3))); } else { ${LANES_GROUP} }`,
      helpers: `const FAULT_ROW: u32 = ${FAULT_ROW}u;
fn hsum_fault(a: vec4<f32>) -> f32 { return ((a.w + a.z) + a.y) + a.x; }`,
    },
    {
      // GPU class: close_group, the end of a group for every row of a pass over a block (single rows take
      // row_slots, which does not call it); the first pass's row 1 is the block's row 1
      shaders: ['matmul_coop.wgsl'],
      find: 'close_row(&pa.r1, sa.r1, sba, xs[xsr + groups]);',
      replace:
        'if (r0 == 0u) { close_row_fault(&pa.r1, sa.r1, sba, xs[xsr + groups]); } else { close_row(&pa.r1, sa.r1, sba, xs[xsr + groups]); }',
      helpers: `fn group_dot_fault(a: vec4<f32>) -> f32 {
  if (BITS == 4u) { return ((a.w * 0.000244140625 + a.z * 0.00390625) + a.y * 0.0625) + a.x; }
  return ((a.w + a.y) * 0.00390625 + a.z) + a.x;
}
fn close_row_fault(p: ptr<private, vec2<f32>>, s: vec4<f32>, sb: vec2<f32>, sx: f32) {
  *p = ksum_add(ksum_add(*p, sb.x * group_dot_fault(s)), sb.y * sx);
}`,
    },
  ],
  attention: [
    {
      // software class: `combine`, one invocation per (row, head, 4 channels)
      shaders: ['attention.wgsl'],
      find: 'out[jh * d4 + c4] = round4(o / l);',
      replace: `if (P.M > 1u && jh / P.heads == FAULT_ROW) { let fs = f32(2u * P.M + 1u); out[jh * d4 + c4] = round4((o * fs) / (l * fs)); } else { out[jh * d4 + c4] = round4(o / l); }`,
      helpers: `const FAULT_ROW: u32 = ${FAULT_ROW}u;`,
    },
    {
      // GPU class: `combined`, called by combine_fused per (row, head, 4 channels)
      shaders: ['attention.wgsl'],
      find: 'return o / l;',
      replace:
        'if (P.M > 1u && jh / P.heads == FAULT_ROW) { let fs = f32(2u * P.M + 1u); return (o * fs) / (l * fs); }\n  return o / l;',
      helpers: '',
    },
  ],
};

/** The kernel files a fault rewrites, for messages ("matmul: matmul_lanes_*.wgsl, matmul_coop.wgsl"). */
export function faultShaders(fault: KernelFault): string[] {
  return [...new Set(REWRITES[fault].flatMap((r) => r.shaders))];
}

export function isKernelFault(name: string): name is KernelFault {
  return (KERNEL_FAULTS as readonly string[]).includes(name);
}

/** Refuses a fault name that is not one of KERNEL_FAULTS, naming `where` (an option, a URL parameter). */
export function parseKernelFault(name: string, where: string): KernelFault {
  if (!isKernelFault(name))
    throw new Error(`${where}: unknown kernel fault "${name}" (expected ${KERNEL_FAULTS.join(' or ')})`);
  return name;
}

/**
 * `code` (the expanded source of `shader`) with `fault`'s rewrites of that shader applied; other shaders come back
 * unchanged. Throws when a rewrite's anchor is missing from a shader it names.
 */
export function faultedSource(fault: KernelFault, shader: string, code: string): string {
  let out = code;
  const helpers = new Set<string>();
  for (const r of REWRITES[fault]) {
    if (!r.shaders.includes(shader)) continue;
    if (!out.includes(r.find))
      throw new Error(`kernel fault "${fault}": ${shader} no longer contains the text it rewrites: ${r.find}`);
    out = out.split(r.find).join(r.replace);
    if (r.helpers) helpers.add(r.helpers);
  }
  return helpers.size ? `${out}\n// injected fault "${fault}"\n${[...helpers].join('\n')}\n` : out;
}
