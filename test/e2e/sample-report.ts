/**
 * Hand-made ProbeReports that follow ringside-report/1 exactly, for rendering tests that need no model:
 * an equal run, a diverging run with localization (stages, lens, ring) shaped like the 12B on Metal, and
 * a crafted report whose strings carry markup.
 */
import {
  FINAL_STAGES,
  LAYER_STAGES,
  REPORT_SCHEMA,
  type DrawResult,
  type ProbeReport,
  type StageDiff,
} from '../../src/parity/report.ts';
import { compilerProvenance } from '../../src/parity/compiler-provenance.ts';
import { fmtInt } from '../../src/util/number-format.ts';

const adapter = {
  vendor: 'apple',
  architecture: 'metal-3',
  device: '',
  description: 'Apple M3 Max',
  limits: {
    maxBufferSize: 4294967296,
    maxStorageBufferBindingSize: 4294967292,
    maxComputeInvocationsPerWorkgroup: 1024,
  },
  features: ['shader-f16', 'subgroups', 'timestamp-query'],
  adapterFeatures: ['shader-f16', 'subgroups', 'timestamp-query'],
  subgroupMinSize: 32,
  subgroupMaxSize: 32,
  isFallbackAdapter: false,
  platform: 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) Chrome/140',
};

const target = {
  label: 'gemma-4-12b-it-4bit',
  modelType: 'gemma4_unified',
  digest: '3f2a9c1d7e5b4a6f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f7',
  layers: 48,
  hidden: 3840,
  heads: 16,
  window: 1024,
  vocab: 262144,
  quantization: 'affine 4-bit g64 (200), affine 8-bit g64 (97)',
  bytes: 6_700_000_000,
};

const assistant = {
  ...target,
  label: 'gemma-4-12b-it-assistant',
  modelType: 'gemma4_unified_assistant',
  digest: '9a8b7c6d5e4f30211203f4e5d6c7b8a99a8b7c6d5e4f30211203f4e5d6c7b8a9',
  layers: 4,
  hidden: 1024,
  quantization: 'affine 4-bit g64 (21)',
  bytes: 80_000_000,
};

const ROW_BYTES = 262144 * 2;
const layerKind = (l: number, layers: number): 'sliding' | 'full' =>
  l === layers - 1 || l % 6 === 5 ? 'full' : 'sliding';

function equalDraw(index: number, promptLength: number, K: number): DrawResult {
  return {
    index,
    salt: 977 * index + 1,
    promptLength,
    verdict: 'equal',
    position: null,
    bytesDiffering: 0,
    bytesTotal: ROW_BYTES,
    text: `all ${K} verify block positions equal the single-token chain in all ${fmtInt(ROW_BYTES)} logit bytes`,
    rows: Array.from({ length: K }, (_, j) => ({
      position: j,
      bytesDiffering: 0,
      bytesTotal: ROW_BYTES,
      maxAbs: 0,
      maxUlp: 0,
      nmse: 0,
    })),
    firstDivergence: null,
    timings: { prefillMs: 40 + index, chainMs: 120, blockMs: 45 },
  };
}

function provenance(policy: string, K: number, lengths: number[]) {
  return {
    app: { name: 'ringside' as const, version: '0.1.0' },
    createdAt: '2025-11-29T22:30:00.000Z',
    // Fresh copies: craftedReport mutates what it gets.
    adapter: structuredClone(adapter),
    platform: adapter.platform,
    // the record a page on that user agent makes (Chrome on a Mac: Dawn on Metal, relaxed math)
    compiler: compilerProvenance({ userAgent: adapter.platform, runtime: { kind: 'browser' } }),
    policy,
    precision: 'bf16' as const,
    block: K,
    drawLengths: lengths,
    prefillChunk: 512,
    draftPosition: 'mlxcel' as const,
    target: { ...target },
    assistant: { ...assistant },
  };
}

export function equalReport(K = 4): ProbeReport {
  const lengths = [8, 8, 8, 1056];
  return {
    schema: REPORT_SCHEMA,
    kind: 'probe',
    verdict: 'equal',
    summary: `block-versus-chain probe passed: ${lengths.length} draws, every verify position equals the single-token chain in all logit bytes`,
    consequence: 'MTP would be enabled',
    provenance: provenance('exact', K, lengths),
    draws: lengths.map((n, i) => equalDraw(i, n, K)),
    timings: { totalMs: 2345, loadMs: 8100 },
  };
}

/** The long draw diverges at layer 0 (sliding) attention, position 0, and the difference grows with depth. */
export function divergingReport(K = 4, layers = 48, W = 1024): ProbeReport {
  const lengths = [8, 8, 8, Math.min(W + 32, 1536)];
  const P = lengths[3];
  const stages: StageDiff[] = [];
  const grow = (l: number, s: number, j: number) =>
    l === 0 && s < 3 ? 0 : Math.min(1, 0.02 * (l + 1) * (1 + s / 6) * (1 + j / 2));
  for (let l = 0; l < layers; l++) {
    LAYER_STAGES.forEach((stage, si) => {
      const rows = Array.from({ length: K }, (_, j) => {
        const f = grow(l, si, j);
        const bytesTotal = stage === 'q' || stage === 'k' || stage === 'v' ? 8192 : 7680;
        const d = Math.round(f * bytesTotal);
        return {
          position: j,
          bytesDiffering: d,
          bytesTotal,
          maxAbs: d ? 1e-3 * f : 0,
          maxUlp: d ? Math.round(2 ** (f * 20)) : 0,
          nmse: d ? 1e-9 * f : 0,
        };
      });
      stages.push({ layer: l, layerKind: layerKind(l, layers), stage, rows });
    });
  }
  for (const stage of FINAL_STAGES) {
    stages.push({
      layer: null,
      layerKind: null,
      stage,
      rows: Array.from({ length: K }, (_, j) => ({
        position: j,
        bytesDiffering: stage === 'logits' ? 500_000 - j : 7000,
        bytesTotal: stage === 'logits' ? ROW_BYTES : 7680,
        maxAbs: 0.25,
        maxUlp: 4096,
        nmse: 1e-4,
      })),
    });
  }
  const slotPositions = Array.from({ length: W }, (_, s) => P - W + ((s - (P % W) + W) % W));
  const long: DrawResult = {
    index: 3,
    salt: 977 * 3 + 1,
    promptLength: P,
    verdict: 'diverges',
    position: 0,
    bytesDiffering: 411_230,
    bytesTotal: ROW_BYTES,
    text: `verify block position 0 differs from the single-token chain in 411,230 of ${fmtInt(ROW_BYTES)} logit bytes`,
    rows: Array.from({ length: K }, (_, j) => ({
      position: j,
      bytesDiffering: 411_230 + 1000 * j,
      bytesTotal: ROW_BYTES,
      maxAbs: 0.125 * (j + 1),
      maxUlp: 2048,
      nmse: 3.2e-6,
    })),
    firstDivergence: {
      layer: 0,
      layerKind: 'sliding',
      stage: 'attn',
      position: 0,
      text: 'first divergence: layer 0 (sliding) attention output at position 0',
    },
    stages,
    lens: Array.from({ length: layers }, (_, l) => ({
      layer: l,
      rows: Array.from({ length: K }, (_, j) => ({
        position: j,
        kl: 1e-9 * 2 ** (l / 2) * (j + 1),
        top1Agree: l < layers - 6 || j === 0,
      })),
    })),
    ring: {
      window: W,
      slotPositions,
      blockStart: P,
      base: 0,
      blockSlots: Array.from({ length: K }, (_, t) => (P + t) % W),
      chainOrder: 'physical',
      blockOrder: 'masked-chronological',
    },
    timings: { prefillMs: 900, chainMs: 300, blockMs: 90, localizeMs: 4200 },
  };
  return {
    schema: REPORT_SCHEMA,
    kind: 'probe',
    verdict: 'diverges',
    summary: `block-versus-chain probe failed: 1 of 4 draws differ; ${long.text}`,
    consequence: 'MTP would be declined (fail closed) unless inexact verify is explicitly allowed',
    provenance: provenance('mlx-metal', K, lengths),
    draws: [equalDraw(0, 8, K), equalDraw(1, 8, K), equalDraw(2, 8, K), long],
    timings: { totalMs: 8123, loadMs: 8100 },
  };
}

export const XSS = '<img src=x onerror="window.__pwned=(window.__pwned||0)+1">';
export const XSS2 = '"><script>window.__pwned=(window.__pwned||0)+1</script><b>';

/** Every string a renderer shows carries markup; numbers are replaced by strings where the validator allows it. */
export function craftedReport(): unknown {
  const r = divergingReport(4, 12, 16) as unknown as Record<string, any>;
  r.summary = `summary ${XSS}`;
  r.consequence = `consequence ${XSS2}`;
  r.provenance.policy = `policy ${XSS}`;
  r.provenance.platform = `platform ${XSS2}`;
  r.provenance.target.label = `label ${XSS}`;
  r.provenance.target.quantization = `quant ${XSS}`;
  r.provenance.target.layers = `<b>48</b>`; // not a number: must print as a dash
  r.provenance.adapter.description = `adapter ${XSS}`;
  r.provenance.adapter.features = [XSS];
  r.provenance.app.version = XSS2;
  for (const d of r.draws) {
    d.text = `draw text ${XSS}`;
    d.rows[0].maxAbs = '<i>1</i>';
    d.rows[0].position = XSS;
  }
  const long = r.draws[3];
  long.firstDivergence.text = `first ${XSS}`;
  long.stages.push({
    layer: XSS,
    layerKind: XSS,
    stage: XSS,
    rows: [{ position: XSS, bytesDiffering: 0, bytesTotal: 4 }],
  });
  long.stages[0].layerKind = XSS2;
  long.ring.blockOrder = XSS;
  long.ring.slotPositions[0] = XSS;
  long.lens[0].rows[0].kl = XSS;
  return r;
}
