/** The provenance list (adapter, platform, settings, checkpoints) of a probe or a trace report, as text. */
import { familyName, type CheckpointInfo, type Provenance, type SelfTestRecord } from '../../parity/report.ts';
import type { CompilerProvenance } from '../../parity/compiler-provenance.ts';
import { el } from '../common/dom.ts';
import { limitProfile } from '../../gpu/limit-profiles.ts';
import { fmtBytes, fmtInt, fmtList, shortDigest } from '../common/format.ts';
import { exactnessText } from '../common/exactness-view.ts';

// A Qwen3.5 target has no sliding window (its CheckpointInfo says 0): say so rather than "window 0".
const windowText = (c: CheckpointInfo) =>
  familyName(c.modelType) === 'Qwen3.5' ? 'no sliding window' : `window ${fmtInt(c.window)}`;
const ck = (c: CheckpointInfo) =>
  `${c.modelType} · ${c.label} · ${fmtInt(c.layers)} layers, hidden ${fmtInt(c.hidden)}, ${fmtInt(c.heads)} heads, ${windowText(c)}, vocab ${fmtInt(c.vocab)} · ${c.quantization} · ${fmtBytes(c.bytes)} · digest ${shortDigest(c.digest)}`;

/** The shader compiler and its math mode, where the report records them (reports made before do not). */
function compilerRows(c: CompilerProvenance | undefined): [string, string][] {
  if (!c) return [];
  return [
    ['Compiler', `${c.browser} on ${c.os} · ${c.engine} → ${c.backend} (backend from ${c.backendFrom})`],
    ['Math mode', `${c.math} · ${c.mathSource}`],
  ];
}

/** The commit the page was served from, where the report names one. */
export const commitText = (p: Pick<Provenance, 'commit'>): string => p.commit ?? 'not recorded';

/** The GPU self-test's outcome without its time: "passed: 2 of 3 checks passed, 1 skipped". */
export function selfTestOutcome(t: SelfTestRecord): string {
  const passed = t.checks - t.failed - t.skipped;
  return `${t.ok ? 'passed' : 'FAILED'}: ${passed} of ${t.checks} checks passed${t.failed ? `, ${t.failed} failed` : ''}${t.skipped ? `, ${t.skipped} skipped` : ''}`;
}

/** The GPU self-test that ran before the report, in words, with when it ran. */
export function selfTestText(p: Pick<Provenance, 'selfTest'>): string {
  return p.selfTest ? `${selfTestOutcome(p.selfTest)} (${p.selfTest.at})` : 'none ran before this report';
}

/** `settings` replaces the probe's draw lengths with the rows of another kind (a trace's prefix and traced). */
export function provenanceList(p: Provenance, testid: string, settings?: [string, string][]): HTMLElement {
  const a = p.adapter;
  const lim = (k: string) => (Number.isFinite(a.limits[k]) ? fmtBytes(a.limits[k]) : '—');
  const rows: [string, string][] = [
    [
      'Adapter',
      [a.vendor, a.architecture, a.description].filter(Boolean).join(' · ') +
        (a.isFallbackAdapter ? ' (fallback adapter)' : '') || 'unknown',
    ],
    ['Features', a.features.join(', ') || 'none'],
    [
      'Limits',
      `max buffer ${lim('maxBufferSize')}, binding ${lim('maxStorageBufferBindingSize')}` +
        (a.limitProfile ? `, capped to ${limitProfile(a.limitProfile).browser}'s (profile ${a.limitProfile})` : ''),
    ],
    ['Platform', p.platform],
    ...compilerRows(p.compiler),
    ['Policy', p.policy],
    ['Precision', p.precision === 'bf16' ? 'bf16 activations (MLX rounding points)' : 'f32 activations'],
    ['Block width K', fmtInt(p.block)],
    ...(settings ?? [['Draw lengths', fmtList(p.drawLengths)] as [string, string]]),
    ['Prefill chunk', fmtInt(p.prefillChunk)],
    ...(p.draftPosition ? [['Draft position', p.draftPosition] as [string, string]] : []),
    ['Target', ck(p.target)],
    ...(p.assistant ? [['Assistant', ck(p.assistant)] as [string, string]] : []),
    ...(p.exactnessSelfTest ? [['Exactness self-test', exactnessText(p.exactnessSelfTest)] as [string, string]] : []),
    ['Created', `${p.createdAt} by ringside ${p.app.version}`],
    ['Commit', commitText(p)],
    ['Self-test', selfTestText(p)],
  ];
  return el(
    'dl',
    { class: 'kv', 'data-testid': testid },
    ...rows.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)]),
  );
}
