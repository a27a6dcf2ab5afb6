/**
 * A hand-made classic-versus-MTP generation run (the page's GenerationRun, what its JSON holds) for rendering and
 * reading tests that need no model: 16 tokens at K = 4 after a 3-token prompt, the MTP arm identical to classic or
 * differing at token 8, six rounds that rebuild the MTP tokens, and a provenance on a given adapter.
 */
import type { GenerateResult } from '../../src/model/generate.ts';
import { diffGenerations } from '../../src/parity/generation-diff.ts';
import type { GenerationRun } from '../../src/ui/generation/generation-model.ts';
import { equalReport } from './sample-report.ts';

const CLASSIC = [258, 17, 901, 33, 33, 7, 512, 88, 91, 4, 60, 61, 62, 63, 64, 65];
const DIFFERING = [258, 17, 901, 33, 33, 7, 512, 88, 92, 4, 60, 61, 70, 63, 64, 65];

/** SwiftShader as Chromium reports it (a software adapter), or an Apple GPU (equalReport's). */
const SWIFTSHADER = {
  vendor: 'google',
  architecture: 'swiftshader',
  device: '',
  description: 'SwiftShader Device (Subzero)',
  limits: { maxBufferSize: 1073741824, maxStorageBufferBindingSize: 1073741824 },
  features: ['subgroups', 'timestamp-query'],
  adapterFeatures: ['subgroups', 'timestamp-query'],
  isFallbackAdapter: true,
  platform: 'Mozilla/5.0 (X11; Linux x86_64) HeadlessChrome/156.0.0.0',
};

export function sampleGeneration(o: { differ?: boolean; software?: boolean } = {}): GenerationRun {
  const mtpTokens = o.differ ? DIFFERING : CLASSIC;
  // K = 4 rounds rebuilding CLASSIC from token 1: accepted 3, 1, 0, 3, 2, 0
  const rounds = [
    { at: 1, pos: 4, drafts: [17, 901, 33], accepted: 3, verify: [17, 901, 33, 33] },
    { at: 5, pos: 8, drafts: [7, 500, 1], accepted: 1, verify: [7, 512, 9, 9] },
    { at: 7, pos: 10, drafts: [91, 4, 60], accepted: 0, verify: [88, 3, 3, 3] },
    { at: 8, pos: 11, drafts: [mtpTokens[8], 4, 60], accepted: 3, verify: [mtpTokens[8], 4, 60, 61] },
    { at: 12, pos: 15, drafts: [mtpTokens[12], 63, 5], accepted: 2, verify: [mtpTokens[12], 63, 64, 2] },
    { at: 15, pos: 18, drafts: [11, 12, 13], accepted: 0, verify: [65, 1, 1, 1] },
  ];
  const counters = {
    rounds: 6,
    drafted: 18,
    accepted: 9,
    acceptanceRate: 0.5,
    meanAcceptedLength: 1.5,
    acceptedHistogram: [2, 1, 1, 2],
    perPositionAccepted: [4, 3, 2],
  };
  const arm = (mode: 'classic' | 'mtp', tokens: number[], sha: string, tps: number): GenerateResult => ({
    mode,
    block: 4,
    prompt: [2, 105, 17],
    tokens,
    sha256: sha,
    stoppedOnEos: false,
    ...(mode === 'mtp' ? { counters, rounds } : {}),
    timings: {
      prefillMs: mode === 'classic' ? 1490 : 1210,
      decodeMs: mode === 'classic' ? 2390 : 3850,
      tokensPerSecond: tps,
      decodePipelines: { created: 12, ms: 4, tokensPerSecondWithout: tps * 1.01 },
    },
  });
  const classic = arm('classic', CLASSIC, 'a'.repeat(64), 6.28);
  const mtp = arm('mtp', mtpTokens, o.differ ? 'b'.repeat(64) : 'a'.repeat(64), 3.9);
  const p = equalReport().provenance;
  return {
    options: {
      prompt: [2, 105, 17],
      chat: false,
      maxNew: 16,
      block: 4,
      policy: 'exact',
      precision: 'f32',
      draftPosition: 'hf',
    },
    result: {
      classic,
      mtp,
      diff: diffGenerations(classic, mtp),
      drafter: { kind: 'assistant', text: 'the MTP assistant gemma-4-12b-it-assistant' },
      provenance: {
        app: p.app,
        createdAt: '2026-12-07T03:55:12.000Z',
        adapter: o.software ? SWIFTSHADER : p.adapter,
        platform: o.software ? SWIFTSHADER.platform : p.platform,
        ...(p.compiler ? { compiler: p.compiler } : {}),
        target: p.target,
        ...(p.assistant ? { assistant: p.assistant } : {}),
      },
    },
    createdAt: '2026-12-07T03:55:12.000Z',
    elapsedMs: 9_120,
  };
}
