/**
 * A classic-versus-MTP generation run, live: identical or the first differing token, both continuations
 * side by side (token ids, and text when the target has a tokenizer) with the difference highlighted, the
 * MTP acceptance counters with bars, throughput and the SHA-256 of both outputs. Text nodes only.
 */
import type { GenerateResult } from '../../model/generate.ts';
import type { GenerationProvenance } from '../../worker/engine.ts';
import { append, clear, el } from '../common/dom.ts';
import { verdictHead } from '../common/verdict-head.ts';
import { fmtInt, fmtMs, fmtPercent, plural } from '../common/format.ts';
import { exactnessNodes } from '../common/exactness-view.ts';
import { createShareBar } from '../share/share.ts';
import { generationMarkdown, generationPng, generationSetup } from './generation-share.ts';
import {
  generationFileStem,
  generationJson,
  generationVerdict,
  histogramBars,
  MAX_SHOWN_ROUNDS,
  MAX_SHOWN_TOKENS,
  perPositionBars,
  pipelinesNote,
  roundRows,
  roundsSummary,
  softwareAdapterNote,
  tokenMarks,
  type Bar,
  type GenerationRun,
} from './generation-model.ts';

const fixed = (x: number, d = 2) => (Number.isFinite(x) ? x.toFixed(d) : '—');

function bars(items: Bar[], testid: string, caption: string): HTMLElement {
  return el(
    'div',
    { class: 'bars', 'data-testid': testid, role: 'list', 'aria-label': caption },
    el('p', { class: 'small muted bars-caption' }, caption),
    ...items.map((b) => {
      const share = b.of > 0 ? b.value / b.of : 0;
      return el(
        'div',
        { class: 'bar-row', role: 'listitem' },
        el('span', { class: 'bar-label' }, b.label),
        el(
          'span',
          { class: 'bar-track' },
          el('span', { class: 'bar-fill', style: `width: ${(100 * share).toFixed(1)}%` }),
        ),
        el(
          'span',
          { class: 'bar-value' },
          `${fmtInt(b.value)} of ${fmtInt(b.of)} rounds (${fmtPercent(b.value, b.of)})`,
        ),
      );
    }),
  );
}

function tokensBox(g: GenerateResult, other: GenerateResult, first: number | null, testid: string): HTMLElement {
  const marks = tokenMarks(g.tokens, other.tokens, first);
  return el(
    'div',
    { class: 'tokens', 'data-testid': testid },
    ...marks.map((m, i) => el('span', { class: `tok ${m}`, title: `token ${i}` }, String(g.tokens[i]))),
    g.tokens.length > MAX_SHOWN_TOKENS
      ? el('span', { class: 'muted small' }, ` … ${fmtInt(g.tokens.length - MAX_SHOWN_TOKENS)} more`)
      : null,
  );
}

/**
 * The MTP rounds, one table row each: where the round's drafts start, the drafts (accepted ones marked,
 * the first rejected one highlighted, the unverified rest dimmed), the accepted length and the verify's
 * token emitted at the rejection. Scrolls past a dozen rounds; a checkbox keeps only rejected rounds.
 */
function roundsTable(g: GenerateResult): HTMLElement {
  const rounds = g.rounds;
  if (!rounds) return el('p', { class: 'muted small', 'data-testid': 'mtp-rounds-none' }, 'No rounds in this result.');
  const rows = roundRows(rounds);
  const only = el('input', { type: 'checkbox', 'data-testid': 'mtp-rounds-only-rejected' });
  const tr = rows.map((r) =>
    el(
      'tr',
      { 'data-round': r.index, 'data-rejected': r.rejectedDraft !== null ? 'yes' : 'no' },
      el('td', {}, fmtInt(r.index)),
      el('td', {}, fmtInt(r.at)),
      el('td', {}, fmtInt(r.pos)),
      el(
        'td',
        { class: 'round-drafts' },
        ...r.drafts.map((d) =>
          el(
            'span',
            {
              class: `tok ${d.mark === 'accepted' ? 'accepted' : d.mark === 'rejected' ? 'first' : 'after'}`,
              title: d.mark,
            },
            String(d.token),
          ),
        ),
      ),
      el('td', {}, `${r.accepted} of ${r.drafts.length}`),
      el(
        'td',
        { class: 'round-verify' },
        el('span', { class: r.rejectedDraft !== null ? 'tok verify' : 'tok' }, String(r.verifyToken)),
        r.rejectedDraft !== null ? ` instead of ${r.rejectedDraft}` : ' (all accepted)',
      ),
    ),
  );
  only.addEventListener('change', () => {
    for (const row of tr) row.hidden = only.checked && row.dataset.rejected === 'no';
  });
  return el(
    'div',
    { 'data-testid': 'mtp-rounds' },
    el('p', { class: 'small', 'data-testid': 'mtp-rounds-summary' }, roundsSummary(rounds)),
    el(
      'p',
      { class: 'small muted' },
      'Drafts: green accepted, red the first rejected, grey never verified; blue: the token the verify emitted there.',
    ),
    el('label', { class: 'small' }, only, ' only rounds with a rejected draft'),
    el(
      'div',
      { class: 'table-wrap rounds-wrap' },
      el(
        'table',
        { class: 'data compact gen-rounds', 'data-testid': 'mtp-rounds-table' },
        el(
          'thead',
          {},
          el(
            'tr',
            {},
            ...['round', 'token', 'position', 'drafts', 'accepted', 'verify emitted'].map((h) =>
              el('th', { scope: 'col', class: h === 'drafts' || h === 'verify emitted' ? 'left' : undefined }, h),
            ),
          ),
        ),
        el('tbody', {}, ...tr),
      ),
    ),
    rounds.length > MAX_SHOWN_ROUNDS
      ? el('p', { class: 'muted small' }, `… ${fmtInt(rounds.length - MAX_SHOWN_ROUNDS)} more rounds in the JSON`)
      : null,
  );
}

function arm(
  g: GenerateResult,
  other: GenerateResult,
  title: string,
  first: number | null,
  text: string | undefined,
  prefix: 'classic' | 'mtp',
  provenance: GenerationProvenance | undefined,
): HTMLElement {
  return el(
    'div',
    { class: 'arm', 'data-testid': `${prefix}-arm` },
    el('h3', {}, title),
    el(
      'p',
      { class: 'small muted' },
      `${plural(g.tokens.length, 'token')}${g.stoppedOnEos ? ', stopped on an end-of-turn token' : ''} · ${fixed(g.timings.tokensPerSecond)} tokens/s`,
      g.timings.decodePipelines ? ` (${pipelinesNote(g.timings, provenance)})` : '',
    ),
    tokensBox(g, other, first, `${prefix}-tokens`),
    text !== undefined ? el('pre', { class: 'gen-text', 'data-testid': `${prefix}-text` }, text) : null,
  );
}

function windowTable(run: GenerationRun): HTMLElement | null {
  const w = run.result.diff.window;
  const first = run.result.diff.firstDifference;
  if (!w || first === null) return null;
  const n = Math.max(w.classic.length, w.mtp.length);
  const idx = Array.from({ length: n }, (_, i) => w.start + i);
  const cell = (xs: number[], ys: number[], i: number) =>
    el(
      'td',
      { class: w.start + i === first ? 'first' : w.start + i > first ? (xs[i] === ys[i] ? 'after' : 'differs') : '' },
      i < xs.length ? String(xs[i]) : '·',
    );
  return el(
    'div',
    { class: 'table-wrap' },
    el(
      'table',
      { class: 'data compact gen-window', 'data-testid': 'generation-window' },
      el(
        'caption',
        {},
        `Tokens ${fmtInt(w.start)} to ${fmtInt(w.start + n - 1)} around the first difference (token ${fmtInt(first)})`,
      ),
      el(
        'thead',
        {},
        el('tr', {}, el('th', { scope: 'col' }, 'token'), ...idx.map((i) => el('th', { scope: 'col' }, fmtInt(i)))),
      ),
      el(
        'tbody',
        {},
        el('tr', {}, el('th', { scope: 'row' }, 'classic'), ...idx.map((_, i) => cell(w.classic, w.mtp, i))),
        el('tr', {}, el('th', { scope: 'row' }, 'MTP'), ...idx.map((_, i) => cell(w.mtp, w.classic, i))),
      ),
    ),
  );
}

function counters(run: GenerationRun): HTMLElement {
  const c = run.result.diff.counters ?? run.result.mtp.counters;
  if (!c) return el('p', { class: 'muted small' }, 'No MTP counters in this result.');
  const K = run.options.block;
  const kv: [string, string, string][] = [
    ['rounds', 'Rounds (verify forwards)', fmtInt(c.rounds)],
    ['drafted', 'Drafted tokens', fmtInt(c.drafted)],
    ['accepted', 'Accepted drafts', fmtInt(c.accepted)],
    ['rate', 'Acceptance rate', `${fixed(100 * c.acceptanceRate, 1)}%`],
    ['mean', 'Mean accepted length', `${fixed(c.meanAcceptedLength)} of ${K - 1} drafts per round`],
  ];
  return el(
    'div',
    {},
    el(
      'dl',
      { class: 'kv', 'data-testid': 'mtp-counters' },
      ...kv.flatMap(([k, label, v]) => [el('dt', {}, label), el('dd', { 'data-counter': k }, v)]),
    ),
    bars(histogramBars(c), 'accepted-histogram', 'Rounds by number of drafts accepted'),
    bars(perPositionBars(c), 'per-position-accepted', 'Acceptance per draft position'),
  );
}

function speed(run: GenerationRun): HTMLElement {
  const { classic, mtp, diff } = run.result;
  const row = (name: string, g: GenerateResult, sha: string) =>
    el(
      'tr',
      {},
      el('td', {}, name),
      el('td', {}, fmtInt(g.tokens.length)),
      el('td', {}, fmtMs(g.timings.prefillMs)),
      el('td', {}, fmtMs(g.timings.decodeMs)),
      el('td', {}, fixed(g.timings.tokensPerSecond)),
      el('td', { class: 'sha' }, sha),
    );
  const ratio = diff.tokensPerSecond.mtp / diff.tokensPerSecond.classic;
  return el(
    'div',
    { class: 'table-wrap' },
    el(
      'table',
      { class: 'data', 'data-testid': 'generation-speed' },
      el(
        'thead',
        {},
        el(
          'tr',
          {},
          ...['arm', 'tokens', 'prefill', 'decode', 'tokens/s'].map((h) => el('th', { scope: 'col' }, h)),
          el('th', { scope: 'col', class: 'sha' }, 'SHA-256 of the tokens'),
        ),
      ),
      el(
        'tbody',
        {},
        row('classic', classic, diff.classicSha256),
        row(`MTP (K = ${run.options.block})`, mtp, diff.mtpSha256),
      ),
    ),
    el(
      'p',
      { class: 'small', 'data-testid': 'generation-sha' },
      diff.classicSha256 === diff.mtpSha256
        ? 'Same SHA-256: the two outputs are the same token sequence.'
        : 'The SHA-256 digests differ: the outputs are different token sequences.',
      ` MTP ran at ${fixed(ratio)}× classic's tokens/s.`,
    ),
    softwareAdapterNote(run.result.provenance, run.options.block)
      ? el(
          'p',
          { class: 'small note', 'data-testid': 'generation-software-note' },
          softwareAdapterNote(run.result.provenance, run.options.block),
        )
      : null,
  );
}

/**
 * The generation card. `raw` is the document the exports pass on: the file or link it came from, or (a live run)
 * generationJson of it. Its share bar's test ids start with "generation-".
 */
export function createGenerationView(): {
  root: HTMLElement;
  show(run: GenerationRun, source: string, raw?: unknown): void;
} {
  const source = el('span', { class: 'badge', 'data-testid': 'generation-source' });
  const body = el('div', {});
  let current: { run: GenerationRun; raw: unknown } | undefined;
  const share = createShareBar(
    () =>
      current && {
        raw: current.raw,
        stem: generationFileStem(current.run),
        png: () => generationPng(current!.run),
        markdown: (link) => generationMarkdown(current!.run, link),
      },
    { testPrefix: 'generation-' },
  );
  const root = el(
    'section',
    { class: 'card report', id: 'generation-card', 'aria-labelledby': 'generation-title', hidden: true },
    el(
      'div',
      { class: 'card-head report-head' },
      el('h2', { id: 'generation-title' }, 'Classic versus MTP generation'),
      source,
      share.buttons,
    ),
    share.output,
    body,
  );

  return {
    root,
    show(run, src, raw) {
      current = { run, raw: raw ?? generationJson(run) };
      share.reset();
      root.hidden = false;
      source.textContent = src;
      const r = run.result;
      const v = generationVerdict(r);
      const first = r.diff.firstDifference;
      const o = run.options;
      const promptIds = r.diff.prompt;
      // The draft position is a Gemma 4 assistant's convention; results from before `drafter` was recorded had one.
      const byAssistant = !r.drafter || r.drafter.kind === 'assistant';
      clear(body);
      append(
        body,
        el(
          'div',
          { class: 'verdict-card', 'data-testid': 'generation-verdict', 'data-verdict': v.verdict },
          ...exactnessNodes(r.provenance?.exactnessSelfTest),
          verdictHead(
            v.verdict === 'identical' ? 'equal' : 'diverges',
            v.verdict === 'identical' ? 'IDENTICAL' : 'DIFFERS',
            el('p', { class: 'summary', 'data-testid': 'generation-summary' }, v.text),
            el('p', { class: 'consequence', 'data-testid': 'generation-setup' }, generationSetup(run)),
            r.drafter
              ? el('p', { class: 'small', 'data-testid': 'generation-drafter' }, `Drafts: ${r.drafter.text}`)
              : null,
          ),
        ),
        el(
          'p',
          { class: 'small gen-prompt', 'data-testid': 'generation-prompt' },
          el(
            'strong',
            {},
            `Prompt (${plural(promptIds.length, 'token')}${typeof o.prompt === 'string' ? `, from text${o.chat ? ' in the chat template' : ''}` : ''}): `,
          ),
          promptIds.slice(0, 256).join(', ') + (promptIds.length > 256 ? ', …' : ''),
        ),
        el(
          'div',
          { class: 'two-col even arms' },
          arm(r.classic, r.mtp, 'Classic (one token per forward)', first, r.classicText, 'classic', r.provenance),
          arm(
            r.mtp,
            r.classic,
            `MTP (K = ${o.block}, ${byAssistant ? `draft position ${o.draftPosition}` : r.drafter?.kind === 'oracle' ? 'oracle drafts' : r.drafter?.kind === 'split-drafter' ? 'split MTP drafter' : 'own MTP head'})`,
            first,
            r.mtpText,
            'mtp',
            r.provenance,
          ),
        ),
        windowTable(run),
        el('h3', {}, 'Acceptance'),
        counters(run),
        el('h3', {}, 'Rounds'),
        roundsTable(r.mtp),
        el('h3', {}, 'Speed and digests'),
        speed(run),
      );
    },
  };
}
