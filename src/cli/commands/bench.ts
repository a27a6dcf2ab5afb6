import { writeFile } from 'node:fs/promises';
import { nodeGpuContext } from '../node-gpu.ts';
import { intList, intOption, outputFileOption, positiveNumberOption } from '../args.ts';
import { MAX_LAYERS } from '../bounds.ts';
import { defaultBenchOptions, formatBench, runBench } from '../../bench/run.ts';
import type { AffineKernel } from '../../bench/kernels.ts';
import { checkE2ELayers, defaultE2ELayers, E2E_PRESETS, isE2EPreset } from '../../bench/e2e-model.ts';
import type { Command } from '../command.ts';
import { checkCoopTuning } from '../../gpu/coop-tuning.ts';

const KERNELS: readonly AffineKernel[] = ['lanes', 'tile', 'affine', 'coop'];

export const bench: Command = {
  name: 'bench',
  summary:
    'Throughput of the adapter (copy GB/s, FMA GFLOP/s), of each kernel class at 12B (31B) shapes as ratios to it, and end to end on a small synthetic model.',
  usage:
    'bench [--quick] [--full] [--json FILE] [--no-e2e] [--e2e-preset P] [--e2e-layers N] [--wall-clock] [--prefill-rows N] [--compare lanes,coop,tile,affine] [--compare-head] [--no-subgroups] [--coop-threads N] [--coop-features 1|2|4] [--rows 1,4,8] [--no-kernels]',
  options: {
    quick: { type: 'boolean', help: 'short form (about a minute on a 2-core CPU adapter)' },
    full: { type: 'boolean', help: 'also the 31B shapes' },
    json: { type: 'string', help: 'write the whole result as JSON to this file' },
    'no-e2e': { type: 'boolean', help: 'skip the end-to-end part' },
    'wall-clock': { type: 'boolean', help: 'time kernels with the wall clock even when timestamp-query exists' },
    'e2e-preset': {
      type: 'string',
      help: `geometry of the end-to-end synthetic model: ${E2E_PRESETS.join(', ')} (default 12b); its family's engine runs it`,
    },
    'e2e-layers': {
      type: 'string',
      help: 'layers of the end-to-end model (default 2; E-series and Qwen3.5: the smallest cut that keeps their structure)',
    },
    layers: { type: 'string', help: 'same as --e2e-layers' },
    prompt: { type: 'string', help: 'end-to-end prompt tokens (prefill)' },
    'prefill-rows': {
      type: 'string',
      help: 'rows of the prefill matmul (reduced automatically when one matmul would take too long)',
      default: '1056',
    },
    compare: {
      type: 'string',
      help: `other exact affine kernels measured on the 4-bit MLP shapes (gate/up, down) at M = 1, 4, 8 (${KERNELS.join(', ')}; "none")`,
    },
    'compare-head': { type: 'boolean', help: 'also compare the kernels on the LM head (slow on CPU adapters)' },
    seconds: { type: 'string', help: 'target GPU seconds per kernel measurement' },
    'no-subgroups': {
      type: 'boolean',
      help: 'do not request the subgroups feature (kernels take their paths for devices without it)',
    },
    'coop-threads': {
      type: 'string',
      help: 'tuning: invocations per output feature of the coop matvec (8 or 16) instead of its rule',
    },
    'coop-features': {
      type: 'string',
      help: 'tuning: output features per invocation of the coop matvec (1, 2 or 4) instead of its rule',
    },
    rows: { type: 'string', help: 'M values of the matmul benchmarks, comma-separated' },
    'no-kernels': { type: 'boolean', help: 'skip the kernel benchmarks (yardsticks and end to end only)' },
  },
  async run({ values: v }, io) {
    const o = defaultBenchOptions(v.quick === true, v.full === true);
    if (v['no-e2e']) o.e2e = null;
    if (v['wall-clock']) o.timestamps = false;
    const preset = v['e2e-preset'];
    if (typeof preset === 'string' && o.e2e) {
      if (!isE2EPreset(preset))
        throw new Error(`--e2e-preset: unknown preset "${preset}" (expected ${E2E_PRESETS.join(', ')})`);
      o.e2e.preset = preset;
      o.e2e.layers = defaultE2ELayers(preset);
    }
    const layers = intOption(v, 'e2e-layers', 1, MAX_LAYERS) ?? intOption(v, 'layers', 1, MAX_LAYERS);
    if (layers !== undefined && o.e2e) o.e2e.layers = layers;
    if (o.e2e) checkE2ELayers(o.e2e.preset, o.e2e.layers); // before the kernel figures, not after
    const prompt = intOption(v, 'prompt', 1, 4096);
    if (prompt !== undefined && o.e2e) o.e2e.promptTokens = prompt;
    o.prefillRows = intOption(v, 'prefill-rows', 0, 8192) ?? o.prefillRows;
    if (typeof v.compare === 'string') {
      const list = v.compare === 'none' ? [] : v.compare.split(',').map((s) => s.trim());
      for (const k of list)
        if (!KERNELS.includes(k as AffineKernel))
          throw new Error(`--compare: unknown kernel "${k}" (expected ${KERNELS.join(', ')})`);
      o.compareKernels = list as AffineKernel[];
    }
    if (v['compare-head']) o.compareHead = true;
    const threads = intOption(v, 'coop-threads', 8, 16);
    const features = intOption(v, 'coop-features', 1, 4);
    if (threads !== undefined || features !== undefined) {
      o.coop = { ...(threads !== undefined ? { threads } : {}), ...(features !== undefined ? { features } : {}) };
      checkCoopTuning(o.coop);
    }
    const rows = intList(v, 'rows', { min: 1, max: 8192, count: 64 });
    if (rows) o.matmulRows = rows;
    if (v['no-kernels']) o.models = [];
    o.targetSeconds = positiveNumberOption(v, 'seconds', 600) ?? o.targetSeconds;
    const jsonPath = outputFileOption(v, 'json');
    o.log = (line) => io.err(`bench: ${line}`);
    const ctx = await nodeGpuContext(v['no-subgroups'] ? { disableFeatures: ['subgroups'] } : {});
    try {
      const report = await runBench(ctx, o);
      io.out(formatBench(report));
      if (jsonPath) {
        await writeFile(jsonPath, `${JSON.stringify(report, null, 2)}\n`);
        io.err(`bench: wrote ${jsonPath}`);
      }
      return 0;
    } finally {
      ctx.destroy();
    }
  },
};
