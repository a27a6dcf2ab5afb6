/**
 * A generation run for sharing, as the probe and the trace have it: a Markdown summary (verdict, setup, acceptance,
 * speed, digests, provenance) and a picture of the same (drawn on a canvas with the text API only, so strings from
 * a file or a link cannot inject anything).
 */
import { familyName } from '../../parity/report.ts';
import { fmtInt, fmtMs, fmtPercent, shortDigest } from '../common/format.ts';
import { adapterLine, canvasPng, PngPainter, renderCanvas } from '../share/png-export.ts';
import { mdEscape } from '../share/share-codec.ts';
import { generationVerdict, softwareAdapterNote, type GenerationRun } from './generation-model.ts';

const fixed = (x: number, d = 2) => (Number.isFinite(x) ? x.toFixed(d) : '—');

/** "up to 32 new tokens · K = 4 · policy exact · f32 · draft position hf · done in 21.7 s" */
export function generationSetup(run: GenerationRun): string {
  const o = run.options;
  const r = run.result;
  const byAssistant = !r.drafter || r.drafter.kind === 'assistant';
  return `up to ${fmtInt(o.maxNew)} new tokens · K = ${fmtInt(o.block)} · policy ${o.policy} · ${o.precision}${byAssistant ? ` · draft position ${o.draftPosition}` : ''} · done in ${fmtMs(run.elapsedMs)}`;
}

/** Acceptance in one line: rounds, accepted of drafted, mean accepted length. */
export function acceptanceLine(run: GenerationRun): string {
  const c = run.result.diff.counters ?? run.result.mtp.counters;
  if (!c) return 'no MTP counters';
  return `${fmtInt(c.rounds)} rounds · ${fmtInt(c.accepted)} of ${fmtInt(c.drafted)} drafts accepted (${fmtPercent(c.accepted, c.drafted)}) · mean accepted length ${fixed(c.meanAcceptedLength)} of ${fmtInt(run.options.block - 1)}`;
}

/** Tokens per second of both arms and their ratio. */
export function speedLine(run: GenerationRun): string {
  const { classic, mtp } = run.result;
  const ratio = mtp.timings.tokensPerSecond / classic.timings.tokensPerSecond;
  return `classic ${fixed(classic.timings.tokensPerSecond)} tokens/s · MTP ${fixed(mtp.timings.tokensPerSecond)} tokens/s (${fixed(ratio)}× classic)`;
}

export function generationMarkdown(run: GenerationRun, link?: string): string {
  const r = run.result;
  const v = generationVerdict(r);
  const p = r.provenance;
  const soft = softwareAdapterNote(p, run.options.block);
  const adapter = p
    ? [p.adapter.vendor, p.adapter.architecture, p.adapter.description].filter(Boolean).join(' ') || 'unknown adapter'
    : 'not recorded';
  const lines = [
    `### Ringside classic versus MTP generation: **${v.verdict === 'identical' ? 'IDENTICAL' : 'DIFFERS'}**`,
    '',
    mdEscape(v.text),
    '',
    `_${mdEscape(generationSetup(run))}_`,
    '',
    `- acceptance: ${acceptanceLine(run)}`,
    `- speed: ${speedLine(run)}`,
    ...(soft ? [`- ${mdEscape(soft)}`] : []),
    `- SHA-256 of the tokens: classic \`${shortDigest(r.diff.classicSha256)}\`, MTP \`${shortDigest(r.diff.mtpSha256)}\``,
    ...(r.drafter ? [`- drafts: ${mdEscape(r.drafter.text)}`] : []),
    '',
    '| adapter | platform | target | assistant |',
    '|---|---|---|---|',
    `| ${mdEscape(adapter)} | ${mdEscape(p?.platform ?? '—')} | ${p ? `${mdEscape(p.target.modelType)} \`${shortDigest(p.target.digest)}\`` : '—'} | ${p?.assistant ? `${mdEscape(p.assistant.modelType)} \`${shortDigest(p.assistant.digest)}\`` : '—'} |`,
  ];
  if (link) lines.push('', `[Open the full run](${link})`);
  return `${lines.join('\n')}\n`;
}

/** A token list for the picture: the first `max` ids, and how many more. */
const idsLine = (ids: readonly number[], max = 64) =>
  ids.slice(0, max).join(' ') + (ids.length > max ? ` … (${fmtInt(ids.length - max)} more)` : '');

function paint(ctx: CanvasRenderingContext2D, run: GenerationRun): number {
  const r = run.result;
  const v = generationVerdict(r);
  const p = r.provenance;
  const P = new PngPainter(ctx);
  P.header(
    `◎ Ringside · ${p ? `${familyName(p.target.modelType)} ` : ''}classic versus MTP generation`,
    run.createdAt || p?.createdAt || '',
  );
  P.banner(
    v.verdict === 'identical' ? 'IDENTICAL' : 'DIFFERS',
    v.verdict !== 'identical',
    v.text,
    generationSetup(run),
  );
  P.text(acceptanceLine(run), 15, '#1b1f24', '600');
  P.text(speedLine(run), 15, '#1b1f24');
  const soft = softwareAdapterNote(p, run.options.block);
  if (soft) P.text(soft, 13, '#a15c00');
  P.y += 8;
  for (const [name, g, text] of [
    ['Classic', r.classic, r.classicText],
    [`MTP (K = ${run.options.block})`, r.mtp, r.mtpText],
  ] as const) {
    P.text(`${name}: ${fmtInt(g.tokens.length)} tokens, SHA-256 ${shortDigest(g.sha256)}`, 15, '#1b1f24', '600');
    P.text(text !== undefined ? text.replace(/\s+/g, ' ').slice(0, 600) : idsLine(g.tokens), 13, '#1b1f24');
    P.y += 6;
  }
  P.footer([
    p ? adapterLine(p) : 'adapter not recorded',
    p
      ? `target ${p.target.modelType} ${fmtInt(p.target.layers)} layers, ${p.target.quantization} · digest ${shortDigest(p.target.digest)}` +
        (p.assistant ? ` · assistant ${p.assistant.modelType} · digest ${shortDigest(p.assistant.digest)}` : '') +
        ` · ringside ${p.app.version}`
      : '',
  ]);
  return P.end();
}

export const renderGenerationCanvas = (run: GenerationRun): HTMLCanvasElement => renderCanvas((ctx) => paint(ctx, run));
export const generationPng = (run: GenerationRun): Promise<Blob> => canvasPng(renderGenerationCanvas(run));
