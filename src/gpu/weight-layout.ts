/**
 * Where an affine (MLX-quantized) linear's codes, scales and biases lie in their GPU buffers
 * (shaders/affine_layout.wgsl is the kernels' side of the same fact):
 * - 'mlx': as the checkpoint stores them, row by row (row n's 16-byte words of codes, then row n + 1's);
 * - 'k-major': the rows' k-th 16-byte word side by side (word k of row n at k * rows + n), and group g's
 *   scale and bias of row n at g * rows + n.
 * On a GPU, neighbouring invocations of a matvec take neighbouring rows at the same k (matmul_coop.wgsl:
 * that is what lets them share x); in MLX's layout each then reads its own 16-byte piece of a row, one
 * memory transaction per invocation, and in the k-major one a subgroup's loads are one contiguous run.
 * On an H200 that makes the 12B's single-row matvecs 5-32% faster (docs/PERFORMANCE.md, matvec). The layout
 * moves values, never changes one:
 * every kernel computes the same bytes from either (test/gpu/weight-layout.test.ts).
 *
 * The GPU kernel class gets 'k-major' (uploadWeights); software adapters keep 'mlx', where the lanes
 * kernels read a row's words in order (a CPU's caches and prefetchers want that). Tensors that other views
 * share (a stacked q/k/v) and MoE experts' stacked matrices keep 'mlx'.
 */
import { shaderSource } from './shaders.ts';
import { foldWorkgroups } from './kernels.ts';

export type AffineLayout = 'mlx' | 'k-major';

/** The pipeline constants that select a linear's layout in the kernels (none for MLX's: their default). */
export function layoutConstants(layout: AffineLayout | undefined): Record<string, number> {
  return layout === 'k-major' ? { WT: 1 } : {};
}

/** Whether a linear's rows are whole 16-byte words of codes, which the k-major layout moves as units. */
export function kMajorFits(d: { inFeatures: number; bits: number }): boolean {
  return (d.inFeatures * d.bits) % 128 === 0;
}

/** A linear's rows in the units the k-major rewrite moves: 16-byte words of codes, and groups (bf16 scales, biases). */
export function kMajorCols(d: { inFeatures: number; bits: number; groupSize: number }): {
  codes: number;
  groups: number;
} {
  return { codes: (d.inFeatures * d.bits) / 128, groups: d.inFeatures / d.groupSize };
}

const WG = 256;

/**
 * Rewrites MLX-layout buffers into the k-major layout on the GPU: `codes` moves 16-byte words of a
 * [rows, cols] matrix, `groups` bf16 entries (scales, biases). The destination is a new buffer; the
 * caller frees the source once the copy is submitted (WebGPU keeps it alive until the copy ran).
 */
export class WeightTransposer {
  private readonly pipelines = new Map<string, GPUComputePipeline>();

  constructor(private readonly device: GPUDevice) {}

  transpose(kind: 'codes' | 'groups', src: GPUBuffer, dst: GPUBuffer, rows: number, cols: number): void {
    const entry = kind === 'codes' ? 'words' : 'halves';
    const pipeline = this.pipeline(entry);
    const params = this.device.createBuffer({ size: 16, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
    this.device.queue.writeBuffer(params, 0, new Uint32Array([rows, cols, 0, 0]));
    const at = kind === 'codes' ? [1, 2] : [3, 4];
    const bindGroup = this.device.createBindGroup({
      layout: pipeline.getBindGroupLayout(0),
      entries: [
        { binding: 0, resource: { buffer: params } },
        { binding: at[0], resource: { buffer: src } },
        { binding: at[1], resource: { buffer: dst } },
      ],
    });
    const invocations = kind === 'codes' ? rows * cols : Math.ceil((rows * cols) / 2);
    const [x, y] = foldWorkgroups(Math.ceil(invocations / WG), this.device.limits.maxComputeWorkgroupsPerDimension);
    const enc = this.device.createCommandEncoder({ label: `transpose ${kind}` });
    const pass = enc.beginComputePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, bindGroup);
    pass.dispatchWorkgroups(x, y);
    pass.end();
    this.device.queue.submit([enc.finish()]);
    params.destroy();
  }

  private pipeline(entry: string): GPUComputePipeline {
    let p = this.pipelines.get(entry);
    if (!p) {
      const module = this.device.createShaderModule({
        label: 'transpose_affine.wgsl',
        code: shaderSource('transpose_affine.wgsl'),
      });
      p = this.device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: entry } });
      this.pipelines.set(entry, p);
    }
    return p;
  }
}
