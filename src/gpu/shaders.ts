/**
 * The one registry of WGSL sources. Files live in shaders/ and are imported with `?raw`, which
 * Vite resolves in the browser and scripts/wgsl-hooks.mjs resolves in Node, so both load the very
 * same text. `//#include "file.wgsl"` splices a shared file (WGSL has no includes).
 */
import common from '../../shaders/common.wgsl?raw';
import selftest from '../../shaders/selftest.wgsl?raw';
import selftestF16 from '../../shaders/selftest_f16.wgsl?raw';
import selftestSubgroup from '../../shaders/selftest_subgroup.wgsl?raw';
import matmul from '../../shaders/matmul.wgsl?raw';
import matmulAffineIo from '../../shaders/matmul_affine_io.wgsl?raw';
import affineLayout from '../../shaders/affine_layout.wgsl?raw';
import transposeAffine from '../../shaders/transpose_affine.wgsl?raw';
import matmulLanes from '../../shaders/matmul_lanes.wgsl?raw';
import matmulLanesLoadX from '../../shaders/matmul_lanes_loadx.wgsl?raw';
import matmulLanesSubgroupX from '../../shaders/matmul_lanes_subgroupx.wgsl?raw';
import matmulAffineDot from '../../shaders/matmul_affine_dot.wgsl?raw';
import matmulCoop from '../../shaders/matmul_coop.wgsl?raw';
import matmulDense from '../../shaders/matmul_dense.wgsl?raw';
import matmulSplit from '../../shaders/matmul_split.wgsl?raw';
import matmulMlx from '../../shaders/matmul_mlx.wgsl?raw';
import embed from '../../shaders/embed.wgsl?raw';
import rmsnorm from '../../shaders/rmsnorm.wgsl?raw';
import rope from '../../shaders/rope.wgsl?raw';
import kvCommit from '../../shaders/kv_commit.wgsl?raw';
import elementwise from '../../shaders/elementwise.wgsl?raw';
import argmax from '../../shaders/argmax.wgsl?raw';
import attention from '../../shaders/attention.wgsl?raw';
import qwenCommon from '../../shaders/qwen_common.wgsl?raw';
import gatedDelta from '../../shaders/gated_delta.wgsl?raw';
import qwenOps from '../../shaders/qwen_ops.wgsl?raw';
import ple from '../../shaders/ple.wgsl?raw';
import moe from '../../shaders/moe.wgsl?raw';
import moeExperts from '../../shaders/moe_experts.wgsl?raw';
import centroidHead from '../../shaders/centroid_head.wgsl?raw';

const FILES: Record<string, string> = {
  'common.wgsl': common,
  'selftest.wgsl': selftest,
  'selftest_f16.wgsl': selftestF16,
  'selftest_subgroup.wgsl': selftestSubgroup,
  'matmul.wgsl': matmul,
  'matmul_affine_io.wgsl': matmulAffineIo,
  'affine_layout.wgsl': affineLayout,
  'transpose_affine.wgsl': transposeAffine,
  'matmul_lanes.wgsl': matmulLanes,
  'matmul_lanes_loadx.wgsl': matmulLanesLoadX,
  'matmul_lanes_subgroupx.wgsl': matmulLanesSubgroupX,
  'matmul_affine_dot.wgsl': matmulAffineDot,
  'matmul_coop.wgsl': matmulCoop,
  'matmul_dense.wgsl': matmulDense,
  'matmul_split.wgsl': matmulSplit,
  'matmul_mlx.wgsl': matmulMlx,
  'embed.wgsl': embed,
  'rmsnorm.wgsl': rmsnorm,
  'rope.wgsl': rope,
  'kv_commit.wgsl': kvCommit,
  'elementwise.wgsl': elementwise,
  'argmax.wgsl': argmax,
  'attention.wgsl': attention,
  'qwen_common.wgsl': qwenCommon,
  'gated_delta.wgsl': gatedDelta,
  'qwen_ops.wgsl': qwenOps,
  'ple.wgsl': ple,
  'moe.wgsl': moe,
  'moe_experts.wgsl': moeExperts,
  'centroid_head.wgsl': centroidHead,
};

/** The shader's text with includes expanded (each file at most once). */
export function shaderSource(name: string, seen = new Set<string>()): string {
  const text = FILES[name];
  if (text === undefined) throw new Error(`Unknown shader "${name}" (known: ${Object.keys(FILES).join(', ')}).`);
  seen.add(name);
  return expandIncludes(text, seen);
}

/**
 * WGSL text (a shader of this tree, or another file: a microbenchmark's variant) with its `//#include`s expanded
 * from this tree's shaders, each file at most once (`seen`: the files already spliced).
 */
export function expandIncludes(text: string, seen = new Set<string>()): string {
  return text.replace(/^\/\/#include "([^"]+)"\s*$/gm, (_m, inc: string) =>
    seen.has(inc) ? '' : shaderSource(inc, seen),
  );
}

/** Every WGSL file of this build by name (the exactness self-test's cache key hashes them). */
export function shaderFiles(): Readonly<Record<string, string>> {
  return FILES;
}
