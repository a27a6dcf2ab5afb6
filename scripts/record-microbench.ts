/**
 * The CPU side of classic decode: chained greedy steps (TargetModel.decodeGreedy, windows of 16 as
 * `generate --mode classic` runs them) on a target folder, with the engine's own counters per token:
 * microseconds of recording per dispatch (ops.ts, the Recorder, bind groups, parameter packing and the
 * WebGPU calls), queue.submit and parameter writes, and waiting. Where recording a step takes as long
 * as the GPU takes to run it (the 12B on an H200: ~760 dispatches per token), this, not a kernel, bounds
 * classic tokens/s. Runs anywhere (lavapipe included: the recording is the same code):
 *
 *   node --import tsx --import ./scripts/wgsl-hooks.mjs scripts/record-microbench.ts TARGET_DIR [TOKENS] [--no-submit]
 *
 * --no-submit drops every queue.submit after the untimed first window (the command buffers are recorded,
 * finished and thrown away; the tokens read back are zeros), so that the recording is timed with no GPU
 * work competing for the host's cores: what lavapipe's threads would otherwise share with it. On a 2-core
 * VM (2026-12-03, tiny preset with 12 layers, GPU kernels forced) that read 8.1-8.5 us per dispatch, of
 * which a CPU profile put ~3.9 us in Dawn's setPipeline / setBindGroup / dispatchWorkgroups.
 */
import { loadModels } from '../src/cli/load-models.ts';
import { TargetModel } from '../src/model/gemma4/dense/dense-target.ts';

const args = process.argv.slice(2);
const noSubmit = args.includes('--no-submit');
const [dir, count] = args.filter((a) => a !== '--no-submit');
if (!dir) throw new Error('usage: record-microbench.ts TARGET_DIR [TOKENS] [--no-submit]');
const tokens = Number(count ?? 256);
const WINDOW = 16;
const m = await loadModels(dir);
try {
  const target = new TargetModel(m.ctx, m.targetWeights, {
    maxContext: tokens + 64,
    maxBlock: 4,
    prefillChunk: 8,
    precision: 'f32',
  });
  const pre = await target.prefill([2, 3, 4, 5, 6, 7, 8, 9], { logits: 'last' });
  let last = pre.argmax![0];
  // one untimed window: pipelines and bind groups are created on first use
  last = (await target.decodeGreedy(last, WINDOW)).at(-1)!;
  if (noSubmit) m.ctx.device.queue.submit = () => {};
  const s0 = { ...target.stats };
  const t0 = performance.now();
  for (let done = 0; done < tokens; done += WINDOW) last = (await target.decodeGreedy(last, WINDOW)).at(-1)!;
  const wall = performance.now() - t0;
  const s = target.stats;
  const n = Math.ceil(tokens / WINDOW) * WINDOW;
  const dispatches = (s.dispatches - s0.dispatches) / n;
  const per = (ms: number) => ((ms * 1000) / n).toFixed(1);
  console.log(
    `${n} chained tokens: ${(wall / n).toFixed(3)} ms per token (${((1000 * n) / wall).toFixed(1)} tok/s), ` +
      `${dispatches.toFixed(1)} dispatches per token; per token: recording ${per(s.encodeMs - s0.encodeMs)} us ` +
      `(${(((s.encodeMs - s0.encodeMs) * 1000) / n / dispatches).toFixed(2)} us per dispatch), ` +
      `submit ${per(s.submitMs - s0.submitMs)} us, waiting ${per(s.waitMs - s0.waitMs)} us` +
      (noSubmit ? ' (submits dropped: no GPU work)' : ''),
  );
  target.destroy();
} finally {
  m.close();
}
