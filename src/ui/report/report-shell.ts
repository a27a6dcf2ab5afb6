/**
 * The report card: title, where the report came from, the share bar, and the body of its kind (the probe
 * view or the trace view; one at a time). One share bar serves both kinds, so its buttons keep one test id.
 */
import { el } from '../common/dom.ts';
import type { AnyReport } from './read-report.ts';
import { createReportView } from './report-view.ts';
import { createShareBar } from '../share/share.ts';
import { createTraceView } from '../trace/trace-view.ts';

const TITLES = { probe: 'Block-versus-chain probe report', trace: 'Teacher-forced trace report' } as const;

export function createReportShell(): {
  root: HTMLElement;
  show(r: AnyReport, source: string, raw: unknown): void;
  kind(): AnyReport['kind'] | undefined;
} {
  const probe = createReportView();
  const trace = createTraceView();
  let kind: AnyReport['kind'] | undefined;
  const share = createShareBar(() =>
    kind === 'probe' ? probe.shareable() : kind === 'trace' ? trace.shareable() : undefined,
  );
  const title = el('h2', { id: 'report-title', 'data-testid': 'report-title' }, 'Report');
  const sourceBadge = el('span', { class: 'badge', 'data-testid': 'report-source' });
  const root = el(
    'section',
    { class: 'card report', id: 'report-card', 'aria-labelledby': 'report-title', hidden: true },
    el('div', { class: 'card-head report-head' }, title, sourceBadge, share.buttons),
    share.output,
    probe.root,
    trace.root,
  );
  return {
    root,
    show(r, source, raw) {
      kind = r.kind;
      root.hidden = false;
      root.setAttribute('data-kind', r.kind);
      title.textContent = TITLES[r.kind];
      sourceBadge.textContent = source;
      share.reset();
      probe.root.hidden = r.kind !== 'probe';
      trace.root.hidden = r.kind !== 'trace';
      if (r.kind === 'probe') probe.show(r.report, raw);
      else trace.show(r.report, raw);
    },
    kind: () => kind,
  };
}
